// fake-plugin figures for ours and the floor worker. A round starts both
// workers one after the other (which goes first alternates between rounds)
// and measures them side by side, taking turns in short batches, so that a
// change in the machine's load hits both alike:
//   start → ready   handle.start(): fork of the shim, spawn of the Go
//                   worker, initialize answered
//   RSS at start    VmRSS of the Go process once ready
//   execute true    median of n sequential executes of `true`, in batches
//                   of 20 that take turns
//   64 × sleep 0.2  wall time of 64 concurrent executes of `sleep 0.2`,
//                   the median of 3 bursts each, taking turns
//   stdout stream   cat of a streamMB text file with an execute.log sink
//                   attached (as the host does), until the result arrives;
//                   every chunk must reach the sink and the result must
//                   carry the 16 MiB tail
//   peak RSS        during the stream: VmRSS sampled every 10 ms, and VmHWM
//                   reset before it; and VmRSS just before it, which is
//                   what the figures before left (run the stream alone,
//                   --figures stream, for a worker that did nothing else)
//   RSS after       +0.5 s, +1 s, +2 s after the lease is released
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { MB, cpuSeconds, goPid, median, memory, nowMs, resetPeak, row, sampleRss, sleep } from "./lib.mjs";

const TAIL = 16 << 20;
const CALL_MS = 300_000; // the host's RPC budget for each call

export async function fakeFigures(host, { rounds, execN, streamMB, scratch, wants, log }) {
  const file = path.join(scratch, "stream.txt");
  const bytes = writeTextFile(file, streamMB);
  // One untimed start of each first, so that no round pays for cold
  // caches. The SDK peer's start → ready is timed in every round too, for
  // scale: a Node worker without a shim.
  const withSdk = host.has("sdk");
  for (const w of ["ours", "floor", ...(withSdk ? ["sdk"] : [])]) await timeStart(host.handle(w));
  const runs = { ours: [], floor: [] };
  const sdk = [];
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? ["floor", "ours"] : ["ours", "floor"];
    const m = await pairedRound(host, order, { execN, file, bytes, wants });
    for (const w of order) {
      runs[w].push(m[w]);
      log(`fake round ${r + 1}/${rounds} ${w}: ${Object.entries(m[w]).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ")}`);
    }
    if (withSdk) sdk.push(await timeStart(host.handle("sdk")));
  }
  const col = (w, k) => runs[w].map((m) => m[k]);
  const both = (k) => [col("ours", k), col("floor", k)];
  const med = (w, k) => median(col(w, k)).toFixed(2);
  const ratio = (op, value) => ({ of: "ratio", op, value });
  const abs = (op, value) => ({ of: "ours", op, value });
  const rows = [
    row("start → ready", "ms", ...both("startMs"), { budget: ratio("<=", 1.2), extra: sdk.length ? { sdk: median(sdk) } : {} }),
    row("RSS at start", "MB", ...both("rssStart"), { budget: abs("<=", 15) }),
  ];
  if (wants("true")) rows.push(row("execute `true`", "ms", ...both("trueMs"), { budget: ratio("<=", 1.15), note: `median of ${execN} sequential calls a round` }));
  if (wants("sleep")) rows.push(row("64 concurrent `sleep 0.2`", "ms", ...both("sleepMs"), { budget: ratio("<=", 1.1), note: "wall time of all 64, median of 3 bursts a round" }));
  if (wants("stream")) {
    rows.push(
      row(`${streamMB} MiB stdout streamed + result`, "MB/s", ...both("streamMBps"), {
        budget: ratio(">=", 0.9), note: "text, cat of a file; all chunks to an execute.log sink",
        extra: {
          "CPU s worker/host": `${med("ours", "streamWorkerCpu")}/${med("ours", "streamHostCpu")}, floor ${med("floor", "streamWorkerCpu")}/${med("floor", "streamHostCpu")}`,
          "last chunk → result ms": `${med("ours", "resultMs")}, floor ${med("floor", "resultMs")}`,
        },
      }),
      row("RSS before the stream", "MB", ...both("rssBefore"), { note: "after the figures above, in the same worker" }),
      row("peak RSS during the stream", "MB", ...both("rssPeak"), { budget: abs("<=", 64) }),
      row("RSS after release +0.5 s", "MB", ...both("rssAfter500")),
      row("RSS after release +1 s", "MB", ...both("rssAfter1000")),
      row("RSS after release +2 s", "MB", ...both("rssAfter2000"), { budget: abs("<=", 32) }),
    );
  }
  return rows;
}

// Starts and stops a worker; returns how long the start took.
async function timeStart(handle) {
  const t0 = nowMs();
  await handle.start();
  const ms = nowMs() - t0;
  await handle.stop();
  return ms;
}

async function pairedRound(host, order, { execN, file, bytes, wants }) {
  const ws = [];
  try {
    for (const name of order) {
      const handle = host.handle(name);
      const t0 = nowMs();
      await handle.start();
      const w = { name, handle, m: { startMs: nowMs() - t0 } };
      ws.push(w);
      w.pid = goPid(handle);
      w.m.rssStart = memory(w.pid).rss / MB;
      w.lease = await acquire(handle);
      w.exec = (command, args, sink) => execute(handle, w.lease, command, args, sink);
    }
    const turn = (k) => (k % 2 ? [...ws].reverse() : ws); // who goes first alternates
    if (wants("true")) {
      for (const w of ws) for (let i = 0; i < 20; i++) await w.exec("true", []);
      const times = new Map(ws.map((w) => [w, []]));
      for (let b = 0; b * 20 < execN; b++) {
        for (const w of turn(b)) {
          for (let k = 0; k < 20; k++) {
            const t0 = nowMs();
            await w.exec("true", []);
            times.get(w).push(nowMs() - t0);
          }
        }
      }
      for (const w of ws) w.m.trueMs = median(times.get(w));
    }
    if (wants("sleep")) {
      const bursts = new Map(ws.map((w) => [w, []]));
      for (let k = 0; k < 3; k++) {
        for (const w of turn(k)) {
          const t0 = nowMs();
          await Promise.all(Array.from({ length: 64 }, () => w.exec("sleep", ["0.2"])));
          bursts.get(w).push(nowMs() - t0);
        }
      }
      for (const w of ws) w.m.sleepMs = median(bursts.get(w));
    }
    for (const w of ws) {
      if (wants("stream")) Object.assign(w.m, await stream(w, file, bytes));
      await release(w.handle, w.lease);
      if (wants("stream")) Object.assign(w.m, await rssAfterRelease(w.pid));
    }
  } finally {
    await Promise.all(ws.map((w) => w.handle.stop()));
  }
  return Object.fromEntries(ws.map((w) => [w.name, w.m]));
}

// The stream figures of worker w: MB/s, the time from the last chunk to
// the result, the CPU the worker and the host (this process) spent, and
// the peak RSS.
async function stream(w, file, bytes) {
  let chars = 0;
  let lastChunk = 0;
  const sink = (_stream, chunk) => {
    chars += chunk.length;
    lastChunk = nowMs();
  };
  const rssBefore = memory(w.pid).rss / MB;
  resetPeak(w.pid);
  const stop = sampleRss(w.pid);
  const cpu0 = [cpuSeconds(w.pid), process.cpuUsage()];
  const t0 = nowMs();
  const res = await w.exec("cat", [file], sink);
  const end = nowMs();
  const hostCpu = process.cpuUsage(cpu0[1]);
  const m = {
    streamMBps: bytes / MB / ((end - t0) / 1000),
    resultMs: end - lastChunk,
    streamWorkerCpu: cpuSeconds(w.pid) - cpu0[0],
    streamHostCpu: (hostCpu.user + hostCpu.system) / 1e6,
    rssBefore,
    rssPeak: Math.max(stop(), memory(w.pid).hwm) / MB,
  };
  if (chars !== bytes || res.stdout.length !== Math.min(TAIL, bytes)) {
    throw new Error(`${w.name}: the sink got ${chars} of ${bytes} characters, the result ${res.stdout.length} of ${TAIL}`);
  }
  return m;
}

async function rssAfterRelease(pid) {
  const m = {};
  const released = nowMs();
  for (const at of [500, 1000, 2000]) {
    await sleep(released + at - nowMs());
    m[`rssAfter${at}`] = memory(pid).rss / MB;
  }
  return m;
}

const base = { driverKey: "fake-plugin", companyId: "company-bench", environmentId: "env-bench", issueId: null, config: { image: "fake:bench", timeoutMs: 120_000, reuseLease: false } };

async function acquire(handle) {
  const got = await handle.call("environmentAcquireLease", { ...base, runId: randomUUID() }, CALL_MS);
  const lease = { providerLeaseId: got.providerLeaseId, metadata: got.metadata ?? {}, expiresAt: got.expiresAt ?? null };
  if (handle.supportedMethods.includes("environmentRealizeWorkspace")) {
    await handle.call("environmentRealizeWorkspace", { ...base, lease, workspace: { mode: "isolated_workspace" } }, CALL_MS);
  }
  return lease;
}

async function execute(handle, lease, command, args, sink) {
  const res = await handle.call("environmentExecute", { ...base, lease, command, args, timeoutMs: 120_000 }, CALL_MS, sink);
  if (res.exitCode !== 0) throw new Error(`${handle.pluginId}: ${command} exited ${res.exitCode}: ${res.stderr}`);
  return res;
}

function release(handle, lease) {
  return handle.call("environmentReleaseLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }, CALL_MS);
}

// A text file of log-like ASCII lines, mb MiB long; returns its size.
function writeTextFile(file, mb) {
  const lines = [];
  for (let i = 0, n = 0; n < 1 << 20; i++) {
    const line = `2026-09-16T12:00:${String(i % 60).padStart(2, "0")}.${String(i % 1000).padStart(3, "0")}Z INFO worker[${i % 97}] step ${i}: compiled module ${i * 7919 % 10007} in ${i % 300} ms\n`;
    lines.push(line);
    n += line.length;
  }
  const block = Buffer.from(lines.join("")).subarray(0, 1 << 20);
  writeFileSync(file, Buffer.concat(Array.from({ length: mb }, () => block)));
  return mb << 20;
}
