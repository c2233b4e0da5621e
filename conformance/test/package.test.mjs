// The package as the host's loader sees it: name, entrypoints, manifest
// module, manifest validation, the worker environment, the packed tarball;
// then the release tarballs (make release), each one's layout and an
// installed release run by the host.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { pathToFileURL } from "node:url";
import {
  childPids, importManifest, instanceInfo, loader, manifestValidatorModule, packageDir, packageJson, shared, startHandle, tarList,
} from "./host.mjs";

const locate = await import(pathToFileURL(path.join(packageDir, "dist", "locate.js")).href);

test("package name is a Paperclip plugin package name", () => {
  assert.equal(loader.isPluginPackageName(packageJson.name), true);
  assert.equal(loader.NPM_PLUGIN_PACKAGE_PREFIX, "paperclip-plugin-");
});

test("declared entrypoints all exist", () => {
  assert.deepEqual(packageJson.paperclipPlugin, { manifest: "./dist/manifest.js", worker: "./dist/worker.js" });
  assert.deepEqual(loader.listMissingDeclaredPluginEntrypoints(packageDir, packageJson), []);
  const declared = loader.resolveDeclaredPluginEntrypoints(packageDir, packageJson).map((e) => e.key).sort();
  assert.deepEqual(declared, ["manifest", "worker"]);
});

test("package.json names the platform the bundled binary was built for", () => {
  assert.deepEqual(packageJson.os, [process.platform]);
  assert.deepEqual(packageJson.cpu, [process.arch]);
});

test("manifest module imports and passes Paperclip's manifest validator", async () => {
  const manifest = await importManifest();
  const parsed = shared.pluginManifestV1Schema.safeParse(manifest);
  assert.equal(parsed.success, true, JSON.stringify(parsed.error?.issues));
  const result = manifestValidatorModule.pluginManifestValidator().parse(manifest);
  assert.equal(result.success, true, JSON.stringify(result.errors));
  assert.ok(manifestValidatorModule.pluginManifestValidator().getSupportedVersions().includes(manifest.apiVersion));
  assert.equal(manifest.version, packageJson.version);
  assert.equal(manifest.entrypoints.worker, packageJson.paperclipPlugin.worker);
  assert.ok(manifest.capabilities.includes("environment.drivers.register"));
  const keys = manifest.environmentDrivers.map((d) => d.driverKey);
  assert.ok(keys.includes("fake-plugin"), `drivers: ${keys}`);
  for (const d of manifest.environmentDrivers) assert.equal(d.kind, "sandbox_provider", d.driverKey);
});

test("worker environment from buildPluginWorkerEnv has no HOME and no host secrets", async () => {
  const manifest = await importManifest();
  const env = loader.buildPluginWorkerEnv({
    manifest, packageName: packageJson.name, packagePath: packageDir, instanceInfo,
    processEnv: { HOME: "/root", USER: "root", DATABASE_URL: "postgres://secret", BETTER_AUTH_SECRET: "s", DAYTONA_API_KEY: "d", PATH: "/usr/bin" },
  });
  assert.deepEqual(Object.keys(env).sort(), ["PAPERCLIP_DEPLOYMENT_EXPOSURE", "PAPERCLIP_DEPLOYMENT_MODE"]);
});

test("the packed tarball holds exactly the package directory", () => {
  const out = path.dirname(packageDir);
  const tgz = readdirSync(out).filter((f) => f === `${packageJson.name}-${packageJson.version}.tgz`);
  assert.equal(tgz.length, 1, `no ${packageJson.name}-${packageJson.version}.tgz in ${out}`);
  assert.deepEqual(tarList(path.join(out, tgz[0])), [
    "package/README.md", "package/bin/sandbox-plugin", "package/bin/worker.json",
    "package/dist/locate.js", "package/dist/manifest.js", "package/dist/worker.js", "package/package.json",
  ]);
});

// ---------------------------------------------------------------------------
// The release (make release, PLUGIN_RELEASE_DIR): the main package and one
// package per platform, each tarball checked, and the host running the
// worker of an installed release through its platform package.

const releaseDir = process.env.PLUGIN_RELEASE_DIR;
const noRelease = releaseDir ? false : "PLUGIN_RELEASE_DIR is not set (make conformance sets it after make release)";
const RELEASE_PLATFORMS = [
  { platform: "linux", arch: "x64", format: "elf", machine: 0x3e },
  { platform: "linux", arch: "arm64", format: "elf", machine: 0xb7 },
  { platform: "darwin", arch: "x64", format: "macho", machine: 0x01000007 },
  { platform: "darwin", arch: "arm64", format: "macho", machine: 0x0100000c },
];
const scratch = mkdtempSync(path.join(tmpdir(), "conformance-release-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Unpacks a tarball of the release into dir (npm's "package/" prefix dropped). */
function unpack(tgz, dir) {
  mkdirSync(dir, { recursive: true });
  execFileSync("tar", ["-xzf", path.join(releaseDir, tgz), "-C", dir, "--strip-components=1"]);
  return dir;
}

const readPackage = (dir) => JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
const releaseVersion = () => readPackage(unpack(`${packageJson.name}-${packageJson.version}.tgz`, path.join(scratch, "version"))).version;

/** The mode string tar shows for a member, e.g. "-rwxr-xr-x". */
function tarMode(tgz, member) {
  const line = execFileSync("tar", ["-tvzf", tgz, member], { encoding: "utf8" }).trim();
  return line.split(/\s+/)[0];
}

/** What a binary's header says it runs on: { format, machine }. */
function binaryTarget(file) {
  const b = readFileSync(file).subarray(0, 20);
  if (b.readUInt32BE(0) === 0x7f454c46) return { format: "elf", machine: b.readUInt16LE(18) };
  if (b.readUInt32LE(0) === 0xfeedfacf) return { format: "macho", machine: b.readUInt32LE(4) };
  return { format: "unknown", machine: 0 };
}

test("the release is the main tarball and one tarball per platform, at one version", { skip: noRelease }, () => {
  const version = releaseVersion();
  const want = [`${packageJson.name}-${version}.tgz`, ...RELEASE_PLATFORMS.map((p) => `${locate.platformPackageName(p.platform, p.arch)}-${version}.tgz`)];
  assert.deepEqual(readdirSync(releaseDir).filter((f) => f.endsWith(".tgz")).sort(), want.sort());
});

test("release main package: manifest, shim and optional platform packages only, accepted by the host's loader and validator", { skip: noRelease }, async () => {
  const version = releaseVersion();
  const tgz = path.join(releaseDir, `${packageJson.name}-${version}.tgz`);
  assert.deepEqual(tarList(tgz), ["package/README.md", "package/dist/locate.js", "package/dist/manifest.js", "package/dist/worker.js", "package/package.json"]);
  const dir = unpack(path.basename(tgz), path.join(scratch, "main"));
  const pkg = readPackage(dir);
  assert.equal(loader.isPluginPackageName(pkg.name), true);
  for (const key of ["os", "cpu", "scripts", "dependencies", "bin"]) assert.equal(pkg[key], undefined, `package.json has ${key}`);
  assert.deepEqual(pkg.optionalDependencies, Object.fromEntries(RELEASE_PLATFORMS.map((p) => [locate.platformPackageName(p.platform, p.arch), version])));
  assert.deepEqual(loader.listMissingDeclaredPluginEntrypoints(dir, pkg), []);
  const manifest = (await import(pathToFileURL(path.join(dir, pkg.paperclipPlugin.manifest)).href)).default;
  const result = manifestValidatorModule.pluginManifestValidator().parse(manifest);
  assert.equal(result.success, true, JSON.stringify(result.errors));
  assert.equal(manifest.version, version);
});

for (const p of RELEASE_PLATFORMS) {
  const name = locate.platformPackageName(p.platform, p.arch);
  test(`release platform package ${name}: only its binary, for ${p.platform}/${p.arch}`, { skip: noRelease }, () => {
    const version = releaseVersion();
    const tgz = path.join(releaseDir, `${name}-${version}.tgz`);
    assert.deepEqual(tarList(tgz), ["package/bin/sandbox-plugin", "package/bin/worker.json", "package/package.json"]);
    assert.match(tarMode(tgz, "package/bin/sandbox-plugin"), /^-rwx/);
    const dir = unpack(path.basename(tgz), path.join(scratch, name));
    const pkg = readPackage(dir);
    assert.deepEqual({ name: pkg.name, version: pkg.version, os: pkg.os, cpu: pkg.cpu }, { name, version, os: [p.platform], cpu: [p.arch] });
    for (const key of ["scripts", "dependencies", "optionalDependencies", "paperclipPlugin", "bin"]) assert.equal(pkg[key], undefined, `package.json has ${key}`);
    assert.equal(loader.isPluginPackageName(pkg.name), false, "the host's npm discovery would take it for a plugin");
    const info = JSON.parse(readFileSync(path.join(dir, "bin", "worker.json"), "utf8"));
    assert.deepEqual({ platform: info.platform, arch: info.arch, version: info.version, binary: info.binary }, { platform: p.platform, arch: p.arch, version, binary: "sandbox-plugin" });
    assert.deepEqual(binaryTarget(path.join(dir, "bin", "sandbox-plugin")), { format: p.format, machine: p.machine });
  });
}

/** A plugin directory's node_modules as npm leaves it after installing the release here. */
function installRelease(into, { withPlatform = true } = {}) {
  const version = releaseVersion();
  const modules = path.join(scratch, into, "node_modules");
  const main = unpack(`${packageJson.name}-${version}.tgz`, path.join(modules, packageJson.name));
  const platformName = locate.platformPackageName(process.platform, process.arch);
  if (withPlatform) unpack(`${platformName}-${version}.tgz`, path.join(modules, platformName));
  return { modules, main, platformName };
}

test("an installed release: the host runs the worker from this platform's package and discovers one plugin", { skip: noRelease }, async () => {
  const { modules, main } = installRelease("installed");
  const found = await loader.pluginLoader(null, { localPluginDir: path.join(scratch, "none") }).discoverFromNpm([modules]);
  assert.deepEqual(found.discovered.map((d) => d.packageName), [packageJson.name]);
  assert.deepEqual(found.errors, []);
  const manifest = (await import(pathToFileURL(path.join(main, "dist", "manifest.js")).href)).default;
  const handle = await startHandle(`plugin-release-${process.pid}`, {
    entrypointPath: path.join(main, "dist", "worker.js"), manifest,
    env: loader.buildPluginWorkerEnv({ manifest, packageName: packageJson.name, packagePath: main, instanceInfo }),
  });
  try {
    const [goPid] = childPids(handle.diagnostics().pid);
    assert.equal(realpathSync(`/proc/${goPid}/exe`), realpathSync(path.join(modules, locate.platformPackageName(process.platform, process.arch), "bin", "sandbox-plugin")));
    assert.equal((await handle.call("health", {})).status, "ok");
  } finally {
    await handle.stop();
  }
});

test("an installed release without its platform package: the shim says what to do", { skip: noRelease }, () => {
  const { main, platformName } = installRelease("no-platform", { withPlatform: false });
  const r = spawnSync(process.execPath, [path.join(main, "dist", "worker.js")], { input: "", encoding: "utf8" });
  assert.equal(r.status, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, new RegExp(`platform package ${platformName}@[^ ]+ .* is not installed next to ${packageJson.name}; .*--omit=optional`));
});
