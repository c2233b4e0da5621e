// Shared setup: load the real Paperclip host code from node_modules and
// describe the packaged plugin under test. The server's modules read
// NODE_ENV and PAPERCLIP_LOG_LEVEL when they load, so they are imported
// dynamically after the environment is set.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

process.env.NODE_ENV = "production"; // the host's logger: plain JSON, no pino-pretty transport
process.env.PAPERCLIP_LOG_LEVEL ??= "silent";

const here = path.dirname(fileURLToPath(import.meta.url));
export const conformanceRoot = path.resolve(here, "..");
export const packageDir = path.resolve(process.env.PLUGIN_PACKAGE_DIR ?? path.join(conformanceRoot, "..", "out", "package"));
if (!existsSync(path.join(packageDir, "package.json"))) {
  throw new Error(`no plugin package at ${packageDir}; run "make package" first (or set PLUGIN_PACKAGE_DIR)`);
}
export const packageJson = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8"));
export const workerEntrypoint = path.resolve(packageDir, packageJson.paperclipPlugin.worker);

const serverDist = path.join(conformanceRoot, "node_modules", "@paperclipai", "server", "dist");
const serverModule = (rel) => import(pathToFileURL(path.join(serverDist, rel)).href);

export const workerManager = await serverModule("services/plugin-worker-manager.js");
export const loader = await serverModule("services/plugin-loader.js");
export const manifestValidatorModule = await serverModule("services/plugin-manifest-validator.js");
export const environmentDriver = await serverModule("services/plugin-environment-driver.js").catch(() => null);
export const sdk = await import("@paperclipai/plugin-sdk");
export const shared = await import("@paperclipai/shared");

/** The manifest as the host loads it: dynamic import of paperclipPlugin.manifest. */
export async function importManifest() {
  const url = pathToFileURL(path.resolve(packageDir, packageJson.paperclipPlugin.manifest)).href;
  const mod = await import(url);
  return mod.default ?? mod;
}

export const instanceInfo = { instanceId: "conformance", hostVersion: "2026.916.1", deploymentMode: "local_trusted", deploymentExposure: "private" };

/** Worker options as plugin-loader's activation path builds them. */
export async function workerOptions(overrides = {}) {
  const manifest = await importManifest();
  return {
    entrypointPath: workerEntrypoint,
    manifest,
    config: {},
    instanceInfo,
    apiVersion: manifest.apiVersion,
    databaseNamespace: null,
    hostHandlers: {},
    autoRestart: false,
    env: loader.buildPluginWorkerEnv({ manifest, packageName: packageJson.name, packagePath: packageDir, instanceInfo }),
    ...overrides,
  };
}

/** Starts a worker handle the way the host's worker manager does. */
export async function startHandle(pluginId, overrides = {}) {
  const handle = workerManager.createPluginWorkerHandle(pluginId, await workerOptions(overrides));
  await handle.start();
  return handle;
}

/** Pids of the direct children of pid (Linux /proc), or [] elsewhere. */
export function childPids(pid) {
  const out = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    }
  } catch {
    return [];
  }
  return out;
}

/** The environment of a process (Linux /proc), or null elsewhere. */
export function processEnv(pid) {
  try {
    const raw = readFileSync(`/proc/${pid}/environ`, "utf8");
    return Object.fromEntries(raw.split("\0").filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
  } catch {
    return null;
  }
}

export function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits for cond(); what (a string, or a function giving one) names it when it does not come. */
export async function waitFor(cond, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out after ${timeoutMs}ms waiting for ${typeof what === "function" ? what() : what}`);
}

export function tarList(tgz) {
  return execFileSync("tar", ["-tzf", tgz], { encoding: "utf8" }).split("\n").filter(Boolean).sort();
}
