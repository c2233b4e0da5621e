// Where the Go worker is, for dist/worker.js; pure functions, so that
// package/test/locate.test.mjs can cover every case.
//
// A package built for one machine ("make package") carries its worker in
// its own bin/. A release package ("make release") carries none: it lists
// one optional dependency per platform, each holding only that platform's
// binary and declaring its os/cpu, and npm installs the one that matches
// the host (the way esbuild, Biome and Turbo ship native binaries). Every
// bin/ holds the binary and worker.json, which says what it was built for.
import path from "node:path";

/**
 * Platform packages are named for Node's process.platform and
 * process.arch. Not "paperclip-plugin-…": the host's npm discovery takes
 * every package of that prefix in its plugin directory for a plugin.
 */
export const PLATFORM_PACKAGE_PREFIX = "paperclip-go-sandbox-";

/** The platform package holding the worker for a Node platform and arch. */
export function platformPackageName(platform, arch) {
  return `${PLATFORM_PACKAGE_PREFIX}${platform}-${arch}`;
}

/** The platforms (platform-arch) whose packages pkg lists. */
export function listedPlatforms(pkg) {
  return Object.keys(pkg.optionalDependencies ?? {})
    .filter((name) => name.startsWith(PLATFORM_PACKAGE_PREFIX))
    .map((name) => name.slice(PLATFORM_PACKAGE_PREFIX.length))
    .sort();
}

/**
 * locateWorker finds the bin/ directory of the worker for this host.
 *
 * @param {object} o
 * @param {object} o.pkg the main package's package.json
 * @param {string} o.root the main package's directory
 * @param {string} o.platform process.platform
 * @param {string} o.arch process.arch
 * @param {(file: string) => boolean} o.exists whether a file exists
 * @param {(name: string) => string | null} o.resolve the package.json of
 *   an installed package as Node resolves it from the main package, or null
 * @returns {{binDir: string, origin: string | null} | {error: string}}
 *   origin is the platform package, null for a bundled worker
 */
export function locateWorker({ pkg, root, platform, arch, exists, resolve }) {
  const bundled = path.join(root, "bin");
  if (exists(path.join(bundled, "worker.json"))) {
    return { binDir: bundled, origin: null };
  }
  const shipped = listedPlatforms(pkg);
  if (shipped.length === 0) {
    return { error: `${root} has no Go worker: neither bin/worker.json nor platform packages in optionalDependencies; reinstall the package or rebuild it with "make package"` };
  }
  const name = platformPackageName(platform, arch);
  if (!shipped.includes(`${platform}-${arch}`)) {
    return { error: `${pkg.name}@${pkg.version} has no prebuilt Go worker for ${platform}/${arch} (it ships ${shipped.join(", ")}); build the package on this machine from the source repository ("make package") and install that directory` };
  }
  const manifest = resolve(name);
  if (manifest === null) {
    return { error: `the platform package ${name}@${pkg.optionalDependencies[name]} that holds the Go worker for ${platform}/${arch} is not installed next to ${pkg.name}; npm leaves optional dependencies out with --omit=optional (or --no-optional) and when a lockfile was made on another platform: reinstall ${pkg.name} without those` };
  }
  return { binDir: path.join(path.dirname(manifest), "bin"), origin: name };
}

/**
 * checkWorkerInfo validates a bin/worker.json and returns the binary to
 * start with its arguments.
 *
 * @param {unknown} info the parsed worker.json
 * @param {object} o
 * @param {string} o.binDir where worker.json is
 * @param {string | null} o.origin the platform package, null when bundled
 * @param {string} o.platform process.platform
 * @param {string} o.arch process.arch
 * @param {string} o.version the main package's version
 * @returns {{binary: string, args: string[]} | {error: string}}
 */
export function checkWorkerInfo(info, { binDir, origin, platform, arch, version }) {
  const where = path.join(binDir, "worker.json");
  const shape = workerInfoShape(info);
  if (shape) return { error: `${where} is not valid: ${shape}` };
  const what = origin === null ? "the bundled Go worker" : `the Go worker in ${origin}`;
  if (info.platform !== platform || info.arch !== arch) {
    return { error: `${what} was built for ${info.platform}/${info.arch}, but this host runs ${platform}/${arch}; install the package built for ${platform}/${arch} (make package PACKAGE_GOOS=... PACKAGE_GOARCH=...)` };
  }
  if (info.version !== version) {
    return { error: `${what} is version ${info.version}, but the plugin package is ${version}; reinstall the plugin so that both come from one release` };
  }
  const binary = path.resolve(binDir, info.binary);
  if (path.dirname(binary) !== path.resolve(binDir)) {
    return { error: `${where} names a binary outside ${binDir}` };
  }
  return { binary, args: info.args ?? [] };
}

/** What is wrong with the shape of a worker.json, "" when nothing. */
function workerInfoShape(info) {
  if (info === null || typeof info !== "object" || Array.isArray(info)) return "not a JSON object";
  for (const key of ["binary", "platform", "arch", "version"]) {
    if (typeof info[key] !== "string") return `${key} must be a string`;
  }
  if (info.args !== undefined && !(Array.isArray(info.args) && info.args.every((a) => typeof a === "string"))) {
    return "args must be an array of strings";
  }
  return "";
}
