// Shared parts of make bench-host: the real host's worker manager, worker
// packages behind our shim, the Go process's memory, and statistics.
import { copyFileSync, cpSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

process.env.NODE_ENV = "production"; // plain JSON host logger, read when the modules load
process.env.PAPERCLIP_LOG_LEVEL ??= "silent";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
export const MB = 1e6; // figures are in MB = 10^6 bytes, and MB/s

/**
 * The host as the conformance suite loads it, and the workers it can
 * start: ours (the package), floor and transport (Go binaries behind a copy
 * of our shim, so every Go worker pays the same Node process in front of
 * it) and the Node SDK peer.
 */
export async function loadHost({ packageDir, modules, scratch, binaries, sdkEntrypoint }) {
  const serverDist = path.join(modules, "@paperclipai", "server", "dist");
  const workerManager = await import(pathToFileURL(path.join(serverDist, "services", "plugin-worker-manager.js")).href);
  const loader = await import(pathToFileURL(path.join(serverDist, "services", "plugin-loader.js")).href);
  const packageJson = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8"));
  const manifestMod = await import(pathToFileURL(path.resolve(packageDir, packageJson.paperclipPlugin.manifest)).href);
  const manifest = manifestMod.default ?? manifestMod;
  const instanceInfo = { instanceId: "bench", hostVersion: "2026.916.1", deploymentMode: "local_trusted", deploymentExposure: "private" };
  const info = JSON.parse(readFileSync(path.join(packageDir, "bin", "worker.json"), "utf8"));
  const ourEntry = path.resolve(packageDir, packageJson.paperclipPlugin.worker);

  function shimPackage(name, binary) {
    const dir = path.join(scratch, name);
    cpSync(path.dirname(ourEntry), path.join(dir, "dist"), { recursive: true }); // the shim and its modules
    mkdirSync(path.join(dir, "bin"), { recursive: true });
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: packageJson.name, version: packageJson.version, type: "module" }));
    copyFileSync(binary, path.join(dir, "bin", name));
    writeFileSync(path.join(dir, "bin", "worker.json"), JSON.stringify({ ...info, binary: name, args: [] }));
    return path.join(dir, "dist", path.basename(ourEntry));
  }
  const entrypoints = { ours: ourEntry, sdk: sdkEntrypoint };
  for (const [name, binary] of Object.entries(binaries)) if (binary) entrypoints[name] = shimPackage(name, binary);

  const env = {
    ...loader.buildPluginWorkerEnv({ manifest, packageName: packageJson.name, packagePath: packageDir, instanceInfo }),
    BENCH_NODE_MODULES: modules,
    ...JSON.parse(process.env.BENCH_WORKER_ENV ?? "{}"),
  };
  let started = 0;
  return {
    has: (name) => Boolean(entrypoints[name]),
    /** A worker handle as the host's worker manager creates it, not yet started; extraEnv adds to its environment. */
    handle(name, extraEnv = {}) {
      return workerManager.createPluginWorkerHandle(`bench-${name}-${++started}`, {
        entrypointPath: entrypoints[name], manifest, config: {}, instanceInfo, apiVersion: manifest.apiVersion,
        databaseNamespace: null, hostHandlers: {}, autoRestart: false, env: { ...env, ...extraEnv },
      });
    },
  };
}

/** The Go worker's pid: the shim's only child (Linux /proc). */
export function goPid(handle) {
  const shim = handle.diagnostics().pid;
  const kids = [];
  for (const task of readdirSync(`/proc/${shim}/task`)) {
    const text = readFileSync(`/proc/${shim}/task/${task}/children`, "utf8").trim();
    if (text) kids.push(...text.split(/\s+/).map(Number));
  }
  if (kids.length !== 1) throw new Error(`the shim ${shim} has children ${JSON.stringify(kids)}, want one`);
  return kids[0];
}

/** VmRSS and VmHWM (the peak since start or the last resetPeak) in bytes. */
export function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key) => Number(status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"))[1]);
  return { rss: kb("VmRSS") * 1024, hwm: kb("VmHWM") * 1024 };
}

/** User + system CPU seconds a process has used (Linux /proc, 100 ticks a second). */
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resets VmHWM to the current RSS (clear_refs 5, Linux ≥ 4.0). */
export function resetPeak(pid) {
  writeFileSync(`/proc/${pid}/clear_refs`, "5");
}

/** Samples VmRSS every ms until stop(), which resolves to the largest sample. */
export function sampleRss(pid, ms = 10) {
  let peak = memory(pid).rss;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, memory(pid).rss);
    } catch { /* gone */ }
  }, ms);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * A result row: the medians of the rounds for ours and a reference
 * (floor, tar), the median of the per-round ratios ours/reference, and
 * the budget (on the ratio, or on ours alone) with its verdict.
 */
export function row(figure, unit, ours, ref = null, { refName = "floor", budget = null, extra = {}, note } = {}) {
  const ratios = ref ? ours.map((v, i) => v / ref[i]) : null;
  const r = {
    figure, unit, ours: median(ours), rounds: { ours },
    ...(ref ? { [refName]: median(ref), ref: refName, ratio: median(ratios) } : {}),
    budget, extra, note,
  };
  if (ref) Object.assign(r.rounds, { [refName]: ref, ratio: ratios });
  if (budget) {
    const v = budget.of === "ratio" ? r.ratio : r.ours;
    r.pass = budget.op === "<=" ? v <= budget.value : v >= budget.value;
  }
  return r;
}

export function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}
