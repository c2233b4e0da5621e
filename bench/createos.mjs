// createos against createos-sim (the fake CreateOS control plane on
// loopback): per round one lease's acquire, realize, execute without and
// with stdin, sync in and out of a tree of mixed file sizes (tree.mjs) and
// release, each with its wall time and the API requests it made by route,
// from the sim's per-route counts (GET /_control/counts; an older sim's
// request log, GET /_control/requests, where it has none). There is
// no floor: the figures are absolute, and the request counts say what a
// step costs on a real network, where every request pays a round trip.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { MB, median, nowMs, row } from "./lib.mjs";
import { drop, makeTree } from "./tree.mjs";

const KEY = "bench-key";
const CALL_MS = 600_000;

export async function createosFigures(host, { rounds, mb, scratch, sim: bin, log }) {
  const src = path.join(scratch, "createos-tree");
  const tree = makeTree(src, mb);
  const sim = await startSim(bin, path.join(scratch, "createos-sim"));
  const handle = host.handle("ours");
  const steps = {};
  try {
    await handle.start();
    const validated = await handle.call("environmentValidateConfig", {
      driverKey: "createos", config: { apiUrl: sim.url, apiKey: KEY, shape: "s-1vcpu-1gb", timeoutMs: 120_000, reuseLease: false },
    });
    if (!validated.ok) throw new Error(`createos config refused: ${validated.errors}`);
    const base = { driverKey: "createos", companyId: "company-bench", environmentId: "env-bench", issueId: null, config: validated.normalizedConfig };
    const call = (method, params) => handle.call(method, { ...base, ...params }, CALL_MS);
    for (let r = 0; r < rounds; r++) {
      let lease;
      let cwd;
      const back = path.join(scratch, "createos-out");
      const plan = [
        ["acquire", async () => {
          const got = await call("environmentAcquireLease", { runId: randomUUID(), workspaceMode: "isolated_workspace", adapterType: "claude_local" });
          lease = { providerLeaseId: got.providerLeaseId, metadata: got.metadata ?? {}, expiresAt: null };
        }],
        ["realize", async () => {
          ({ cwd } = await call("environmentRealizeWorkspace", { lease, workspace: { mode: "isolated_workspace", metadata: {} } }));
        }],
        ["execute `true`", () => expect(call("environmentExecute", { lease, command: "true", cwd, timeoutMs: 60_000 }), "")],
        ["execute `cat` with 1 KiB stdin", () => expect(call("environmentExecute", { lease, command: "cat", cwd, stdin: "x".repeat(1023) + "\n", timeoutMs: 60_000 }), "x".repeat(1023) + "\n")],
        [`syncIn ${mb} MiB tree`, () => sync(call, "environmentSyncIn", lease, src, `${cwd}/bench`, tree)],
        [`syncOut ${mb} MiB tree`, () => sync(call, "environmentSyncOut", lease, `${cwd}/bench`, back, tree)],
        ["release", () => call("environmentReleaseLease", { providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })],
      ];
      for (const [name, fn] of plan) {
        const before = await sim.counts();
        const t0 = nowMs();
        await fn();
        const ms = nowMs() - t0;
        const routes = {};
        for (const [route, n] of Object.entries(await sim.counts())) if (n > (before[route] ?? 0)) routes[route] = n - (before[route] ?? 0);
        (steps[name] ??= []).push({ ms, requests: Object.values(routes).reduce((a, b) => a + b, 0), routes });
      }
      drop(back);
      log(`createos round ${r + 1}/${rounds}: ${Object.entries(steps).map(([k, v]) => `${k} ${v[r].ms.toFixed(0)} ms/${v[r].requests} req`).join(", ")}`);
    }
  } finally {
    if (handle.status === "running") await handle.stop();
    await sim.stop();
    drop(src);
  }
  return Object.entries(steps).map(([name, runs]) => {
    const routes = Object.entries(runs.at(-1).routes).map(([k, v]) => `${k}×${v}`).join(" ");
    const syncRate = /^sync/.test(name) ? { "MB/s": median(runs.map((s) => tree.bytes / MB / (s.ms / 1000))) } : {};
    return row(`createos ${name}`, "ms", runs.map((s) => s.ms), null, {
      extra: { requests: median(runs.map((s) => s.requests)), ...syncRate }, note: routes,
    });
  });
}

async function expect(promise, stdout) {
  const res = await promise;
  if (res.exitCode !== 0 || res.stdout !== stdout) throw new Error(`createos execute: ${JSON.stringify(res).slice(0, 500)}`);
}

async function sync(call, method, lease, from, to, tree) {
  const res = await call(method, { lease, operations: [{ operationId: "bench", files: [{ sourcePath: from, targetPath: to, kind: "directory" }] }] });
  const op = res.operations[0];
  if (op.filesTransferred !== tree.files) throw new Error(`${method} moved ${JSON.stringify(op)}, want ${tree.files} files`);
}

// createos-sim on a free loopback port with the control API, as
// conformance/test/createos-sim.mjs starts it; stop() closes its stdin.
async function startSim(bin, dir) {
  mkdirSync(dir, { recursive: true });
  const child = spawn(bin, ["--listen", "127.0.0.1:0", "--api-key", KEY, "--exit-on-stdin-eof", "--control", "--dir", dir],
    { stdio: ["pipe", "pipe", "pipe"], env: { TMPDIR: dir } });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(out.slice(0, out.indexOf("\n")).trim());
    });
    exited.then(() => reject(new Error(`createos-sim exited before printing its URL:\n${stderr}`)));
  });
  child.stdout.resume();
  return {
    url,
    /** Requests so far by route. */
    async counts() {
      const get = (p) => fetch(`${url}/_control/${p}`, { headers: { "X-Api-Key": KEY } });
      const res = await get("counts");
      if (res.ok) return (await res.json()).data.routes;
      const routes = {};
      for (const q of (await (await get("requests")).json()).data.requests) routes[q.route] = (routes[q.route] ?? 0) + 1;
      return routes;
    },
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}
