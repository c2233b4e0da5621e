// make bench-host: performance figures through the real Paperclip host
// (createPluginWorkerHandle of @paperclipai/server, as the conformance
// suite loads it), for our packaged worker next to a floor that does the
// same real work with nothing else: the Go floor worker (bench/floor)
// behind the same shim, or `tar -c | tar -x` for sync. Every figure is the
// median of its rounds; a ratio is the median of the per-round ratios
// ours/floor, so load that shifts between rounds cancels out.
//
//   node bench/host.mjs --package out/package --floor bin/bench-floor
//     [--transport bin/bench-transport] [--modules conformance/node_modules]
//     [--sim bin/createos-sim] [--figures health,start,true,sleep,stream,sync,createos]
//     [--runs 5] [--n 2000] [--warmup 300] [--batch 100] [--gap-ms 0]
//     [--exec-n 200] [--stream-mb 64] [--sync-mb 1024] [--sync-dir DIR] [--createos-sync-mb 64]
//     [--json out/bench-host.json]
//
// Figures (--figures, default all): health round trips (health.mjs);
// start → ready, RSS at start and, as asked, execute `true`, 64 concurrent
// sleeps and the stdout stream with its RSS (fake.mjs); fake sync of a tree
// against tar, on the file system of --sync-dir (default the temp dir;
// sync.mjs); createos against createos-sim (createos.mjs).
// BENCH_WORKER_ENV='{"GOMAXPROCS":"1"}' adds variables to every worker's
// environment. The script fails when a figure cannot be measured; it never
// fails on a budget.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadHost, parseArgs } from "./lib.mjs";
import { healthFigure } from "./health.mjs";
import { fakeFigures } from "./fake.mjs";
import { syncFigures } from "./sync.mjs";
import { createosFigures } from "./createos.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, "..");
const args = parseArgs(process.argv.slice(2));
const opt = (name, fallback) => args[name] ?? fallback;
const num = (name, fallback) => Number(opt(name, fallback));
const packageDir = path.resolve(opt("package", path.join(root, "out", "package")));
const modules = path.resolve(opt("modules", path.join(root, "conformance", "node_modules")));
const figures = opt("figures", "health,start,true,sleep,stream,sync,createos").split(",").filter(Boolean);
const wants = (f) => figures.includes(f);
const runs = num("runs", 5);
const log = (line) => process.stderr.write(`${line}\n`);
const loadStart = os.loadavg(); // the machine may be shared: the JSON records its load

const scratch = mkdtempSync(path.join(os.tmpdir(), "bench-host-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));
const binaries = { floor: path.resolve(opt("floor", path.join(root, "bin", "bench-floor"))) };
if (args.transport) binaries.transport = path.resolve(args.transport);
const host = await loadHost({ packageDir, modules, scratch, binaries, sdkEntrypoint: path.join(here, "sdk-worker.mjs") });

const rows = [];
if (wants("health")) {
  rows.push(...await healthFigure(host, {
    workers: ["ours", "floor", "transport", "sdk"].filter(host.has), runs,
    n: num("n", 2000), warmup: num("warmup", 300), batch: num("batch", 100), gapMs: num("gap-ms", 0), log,
  }));
}
if (["start", "true", "sleep", "stream"].some(wants)) {
  rows.push(...await fakeFigures(host, { rounds: runs, execN: num("exec-n", 200), streamMB: num("stream-mb", 64), scratch, wants, log }));
}
if (wants("sync")) {
  rows.push(...await syncFigures(host, { rounds: runs, mb: num("sync-mb", 1024), dir: path.resolve(opt("sync-dir", scratch)), log }));
}
if (wants("createos")) {
  rows.push(...await createosFigures(host, { rounds: runs, mb: num("createos-sync-mb", 64), scratch, log, sim: path.resolve(opt("sim", path.join(root, "bin", "createos-sim"))) }));
}

console.log(table(rows));
const jsonPath = path.resolve(opt("json", path.join(root, "out", "bench-host.json")));
mkdirSync(path.dirname(jsonPath), { recursive: true });
writeFileSync(jsonPath, `${JSON.stringify({ ...describeRun(), rows }, null, 2)}\n`);
log(`wrote ${jsonPath}`);

function describeRun() {
  let commit = null;
  try {
    commit = execFileSync("git", ["-C", root, "describe", "--always", "--dirty"], { encoding: "utf8" }).trim();
  } catch { /* not a checkout */ }
  return {
    date: new Date().toISOString(), commit, node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model,
    loadavg: { start: loadStart, end: os.loadavg() }, runs, figures, args,
  };
}

// The human table: figure, ours, its reference, the ratio and the range of
// the rounds' ratios, the budget and its verdict, and whatever else was
// measured next to it.
function table(rows) {
  const f = (v) => (v === undefined ? "" : Number.isInteger(v) || Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));
  const budget = (b) => (!b ? "" : `${b.op === "<=" ? "≤" : "≥"} ${b.value}${b.of === "ratio" ? "×" : ""}`);
  const lines = [["figure", "unit", "ours", "ref", "ratio", "rounds", "budget", "", "also"]];
  for (const r of rows) {
    const ref = r.ref ? `${f(r[r.ref])} ${r.ref}` : "";
    const also = [...Object.entries(r.extra ?? {}).map(([k, v]) => `${k} ${typeof v === "number" ? f(v) : v}`), r.note].filter(Boolean).join("; ");
    const spread = r.rounds.ratio ? `${Math.min(...r.rounds.ratio).toFixed(2)}–${Math.max(...r.rounds.ratio).toFixed(2)}` : "";
    lines.push([r.figure, r.unit, f(r.ours), ref, r.ratio === undefined ? "" : r.ratio.toFixed(2), spread, budget(r.budget), r.budget ? (r.pass ? "pass" : "FAIL") : "", also]);
  }
  const widths = lines[0].map((_, i) => Math.max(...lines.map((l) => [...l[i]].length)));
  const pad = (s, i) => (i >= 2 && i <= 4 ? s.padStart(widths[i]) : s.padEnd(widths[i]));
  const load = `load average ${loadStart[0].toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end`;
  return [`median of ${runs} rounds (MB = 10^6 bytes; ${os.cpus().length} CPUs, ${load}):`, ...lines.map((l) => `  ${l.map(pad).join("  ").trimEnd()}`)].join("\n");
}
