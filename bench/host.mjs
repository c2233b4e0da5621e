// make bench-host: health round trips through the real Paperclip host
// (createPluginWorkerHandle of @paperclipai/server, as the conformance
// suite loads it), for our packaged worker, the Go floor worker
// (bench/floor) behind the same shim, the Node SDK peer, and with
// --transport our transport alone (bench/transport). Each run starts the
// workers, warms them up, times N sequential health calls per worker in
// batches that take turns, and stops them; a run's figure for a worker is
// its median round trip. The report is the median of the runs per worker,
// and the median of the runs' ratios ours/floor (and transport/floor).
//
//   node bench/host.mjs --package out/package --floor bin/bench-floor
//     [--transport bin/bench-transport] [--modules conformance/node_modules]
//     [--n 2000] [--runs 5] [--warmup 300] [--batch 100] [--gap-ms 0]
//     [--only ours,floor,transport,sdk]
//
// --gap-ms leaves the workers idle that long before each timed call (the
// host calls health now and then, not in a loop), so wake-up costs count.
// BENCH_WORKER_ENV='{"GOMAXPROCS":"1"}' adds variables to every worker's
// environment.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

process.env.NODE_ENV = "production"; // plain JSON host logger, read when the modules load
process.env.PAPERCLIP_LOG_LEVEL ??= "silent";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const packageDir = path.resolve(args.package ?? path.join(here, "..", "out", "package"));
const floorBin = path.resolve(args.floor ?? path.join(here, "..", "bin", "bench-floor"));
const transportBin = args.transport ? path.resolve(args.transport) : null;
const modules = path.resolve(args.modules ?? path.join(here, "..", "conformance", "node_modules"));
const N = Number(args.n ?? 2000);
const RUNS = Number(args.runs ?? 5);
const WARMUP = Number(args.warmup ?? 300);
const BATCH = Number(args.batch ?? 100);
const GAP_MS = Number(args["gap-ms"] ?? 0); // idle time before each timed call
const only = args.only ? args.only.split(",") : null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const serverDist = path.join(modules, "@paperclipai", "server", "dist");
const workerManager = await import(pathToFileURL(path.join(serverDist, "services", "plugin-worker-manager.js")).href);
const loader = await import(pathToFileURL(path.join(serverDist, "services", "plugin-loader.js")).href);

const packageJson = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8"));
const manifestMod = await import(pathToFileURL(path.resolve(packageDir, packageJson.paperclipPlugin.manifest)).href);
const manifest = manifestMod.default ?? manifestMod;
const instanceInfo = { instanceId: "bench", hostVersion: "2026.916.1", deploymentMode: "local_trusted", deploymentExposure: "private" };

// The floor and the transport worker run behind a copy of our shim, so
// every Go worker pays the same Node process in front of it.
const info = JSON.parse(readFileSync(path.join(packageDir, "bin", "worker.json"), "utf8"));
const scratch = mkdtempSync(path.join(os.tmpdir(), "bench-host-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));
function shimPackage(name, binary) {
  const dir = path.join(scratch, name);
  mkdirSync(path.join(dir, "dist"), { recursive: true });
  mkdirSync(path.join(dir, "bin"));
  copyFileSync(path.resolve(packageDir, packageJson.paperclipPlugin.worker), path.join(dir, "dist", "worker.js"));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module" }));
  copyFileSync(binary, path.join(dir, "bin", name));
  writeFileSync(path.join(dir, "bin", "worker.json"), JSON.stringify({ ...info, binary: name, args: [] }));
  return path.join(dir, "dist", "worker.js");
}

const workers = [
  { name: "ours", entrypoint: () => path.resolve(packageDir, packageJson.paperclipPlugin.worker) },
  { name: "floor", entrypoint: () => shimPackage("floor", floorBin) },
  { name: "transport", entrypoint: () => shimPackage("transport", transportBin), optional: !args.transport },
  { name: "sdk", entrypoint: () => path.join(here, "sdk-worker.mjs") },
]
  .filter((w) => !w.optional && (!only || only.includes(w.name)))
  .map((w) => ({ ...w, entrypoint: w.entrypoint() }));

function startHandle(worker) {
  const handle = workerManager.createPluginWorkerHandle(`bench-${worker.name}`, {
    entrypointPath: worker.entrypoint,
    manifest,
    config: {},
    instanceInfo,
    apiVersion: manifest.apiVersion,
    databaseNamespace: null,
    hostHandlers: {},
    autoRestart: false,
    env: { ...loader.buildPluginWorkerEnv({ manifest, packageName: packageJson.name, packagePath: packageDir, instanceInfo }), BENCH_NODE_MODULES: modules, ...JSON.parse(process.env.BENCH_WORKER_ENV ?? "{}") },
  });
  return handle.start().then(() => handle);
}

async function health(worker, handle) {
  const res = await handle.call("health", {});
  if (res?.status !== "ok") throw new Error(`${worker.name}: health answered ${JSON.stringify(res)}`);
}

// One run: every worker started, warmed up, then timed in batches that take
// turns, so a change in the machine's load during the run hits them alike.
async function run() {
  const handles = await Promise.all(workers.map(startHandle));
  try {
    const times = workers.map(() => []);
    for (const [i, w] of workers.entries()) for (let k = 0; k < WARMUP; k++) await health(w, handles[i]);
    const batches = Math.max(1, Math.ceil(N / BATCH));
    for (let b = 0; b < batches; b++) {
      for (let j = 0; j < workers.length; j++) {
        const i = (b + j) % workers.length;
        for (let k = 0; k < Math.min(BATCH, N - b * BATCH); k++) {
          if (GAP_MS > 0) await sleep(GAP_MS);
          const t0 = process.hrtime.bigint();
          await health(workers[i], handles[i]);
          times[i].push(Number(process.hrtime.bigint() - t0) / 1000);
        }
      }
    }
    return times.map(median);
  } finally {
    await Promise.all(handles.map((h) => h.stop()));
  }
}

const results = Object.fromEntries(workers.map((w) => [w.name, []]));
for (let r = 0; r < RUNS; r++) {
  const medians = await run();
  workers.forEach((w, i) => results[w.name].push(medians[i]));
  process.stderr.write(`run ${r + 1}/${RUNS}: ${workers.map((w, i) => `${w.name} ${fmt(medians[i])} µs`).join(", ")}\n`);
}

const spacing = GAP_MS > 0 ? `, ${GAP_MS} ms apart` : ", back to back";
console.log(`health round trip through createPluginWorkerHandle, median of ${RUNS} runs of ${N} calls${spacing} (after ${WARMUP} warm-up):`);
const med = {};
for (const w of workers) {
  med[w.name] = median(results[w.name]);
  console.log(`  ${w.name.padEnd(9)} ${fmt(med[w.name]).padStart(7)} µs   runs: ${results[w.name].map(fmt).join(" ")}`);
}
// A ratio is taken within each run, where the batches took turns, and the
// median of those is reported: load that shifts between runs cancels out.
for (const name of ["transport", "ours"]) {
  if (!med[name] || !med.floor) continue;
  const ratios = results[name].map((us, r) => us / results.floor[r]);
  console.log(`  ratio ${name}/floor: ${median(ratios).toFixed(2)}   runs: ${ratios.map((x) => x.toFixed(2)).join(" ")}`);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function fmt(us) {
  return us.toFixed(1);
}

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}
