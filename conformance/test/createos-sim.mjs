// Helpers for createos.test.mjs: a running createos-sim (the fake CreateOS
// control plane, cmd/createos-sim) and a tap on the host logger, so the suite
// can see every log record the host wrote about the worker.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { conformanceRoot } from "./host.mjs";

/**
 * Whether this machine must run the createos-sim suites: Linux as root (the
 * CI runner), or CREATEOS_ISOLATION_REQUIRED=1 (.ci/run sets it), as
 * createostest.IsolationRequired has it for the Go tests.
 */
export const simRequired = process.env.CREATEOS_ISOLATION_REQUIRED === "1" ||
  (process.platform === "linux" && process.getuid?.() === 0);

/**
 * The skip reason of a suite that cannot run the sim here, or, where it
 * must run (simRequired), an error: a suite that silently stopped running
 * cannot pass.
 */
export function skipSim(reason) {
  if (simRequired) throw new Error(`createos-sim suite cannot run on a machine that must run it (Linux as root, or CREATEOS_ISOLATION_REQUIRED=1): ${reason}`);
  return reason;
}

/**
 * Starts createos-sim on a free loopback port with the control API, tied to
 * this process by --exit-on-stdin-eof. Resolves to the running sim, or to
 * { unavailable } when the sim reports that it cannot isolate sandboxes here
 * (no mount or PID namespaces: not root). Any other failure rejects.
 * mounts are the sim's --mount HOST:GUEST values (a host directory shown
 * read-only in every sandbox), paths its --path GUEST values (sandbox
 * directories put first on PATH, login shells included).
 */
export async function startSim({ bin, key, startTimeoutMs = 20_000, mounts = [], paths = [] }) {
  const dir = mkdtempSync(path.join(tmpdir(), "conformance-createos-sim-"));
  const child = spawn(bin, [
    "--listen", "127.0.0.1:0", "--api-key", key, "--exit-on-stdin-eof", "--control",
    "--dir", dir, "--heartbeat", "500ms", ...mounts.flatMap((m) => ["--mount", m]), ...paths.flatMap((p) => ["--path", p]),
  ], { stdio: ["pipe", "pipe", "pipe"], env: { TMPDIR: dir } });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => { stderr += d; });
  child.stdin.on("error", () => {});
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let exit = null;
  exited.then((e) => { exit = e; });

  const firstLine = await new Promise((resolve) => {
    let out = "";
    const done = (line) => { clearTimeout(timer); resolve(line); };
    const timer = setTimeout(() => done(null), startTimeoutMs);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) done(out.slice(0, nl));
    });
    child.stdout.on("end", () => done(out || null));
    child.on("error", (err) => { stderr += `spawn: ${err.message}\n`; done(null); });
  });
  // Keep draining stdout so the sim never blocks on a full pipe.
  child.stdout.resume();

  let stopped = null;
  /** Closes stdin (a clean shutdown that deletes every sandbox); SIGKILL after limitMs. */
  async function stop(limitMs = 10_000) {
    stopped ??= (async () => {
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), limitMs);
      const e = await exited;
      clearTimeout(timer);
      return { ...e, killed: e.signal === "SIGKILL" };
    })();
    return await stopped;
  }
  const removeDir = () => rmSync(dir, { recursive: true, force: true });

  const url = firstLine?.trim() ?? "";
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(url)) {
    await stop(2000);
    removeDir();
    if (/namespaces/.test(stderr)) return { unavailable: stderr.trim() };
    throw new Error(`createos-sim printed ${JSON.stringify(firstLine)} instead of its URL (exit ${JSON.stringify(exit)}); stderr:\n${stderr}`);
  }

  /** A request to the sim's API or control API; resolves to { status, data } of the JSend envelope. */
  async function request(method, urlPath, body) {
    const res = await fetch(url + urlPath, {
      method,
      headers: { "X-Api-Key": key, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    let envelope = {};
    try { envelope = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, data: envelope.data ?? {} };
  }

  /** The sim's request log (control requests are not in it). */
  async function requests() {
    return (await request("GET", "/_control/requests")).data.requests ?? [];
  }

  return {
    url,
    key,
    dir,
    pid: child.pid,
    stderr: () => stderr,
    exited: () => exit,
    stop,
    removeDir,
    request,
    /** A sandbox's status, or "gone" once the sim answers 404. */
    async status(id) {
      const { status, data } = await request("GET", `/v1/sandboxes/${encodeURIComponent(id)}`);
      return status === 404 ? "gone" : data.status;
    },
    /**
     * A sandbox's status from the control API, or "gone" once the sim holds
     * no row for it. Unlike status() this is not a request: it leaves the
     * request log (and so the driver's request counts) alone.
     */
    async state(id) {
      const { status, data } = await request("GET", "/_control/sandboxes");
      if (status !== 200) throw new Error(`the sandbox list answered HTTP ${status}`);
      return (data.sandboxes ?? []).find((sb) => sb.id === id)?.status ?? "gone";
    },
    /** The provider's idle pause of a running sandbox (the control API's auto-pause; not a request). */
    async autoPause(id) {
      const { status } = await request("POST", "/_control/auto-pause", { id });
      if (status !== 200) throw new Error(`auto-pause of ${id} answered HTTP ${status}`);
    },
    /** The sim's request log. */
    requests,
    /** The requests the sim received after the first n (n: an earlier requests().length). */
    async requestsSince(n) {
      return (await requests()).filter((r) => r.seq > n);
    },
    /**
     * The live processes below the sim (Linux /proc) with what tells them
     * apart: pidNs, the PID namespace (a sandbox's own, for its commands),
     * nsPid, the pid inside it (1 for a sandbox's init), and env, the
     * process's environment.
     */
    processes() {
      return descendants(child.pid).map(processInfo).filter(Boolean);
    },
    /** Injects count faults on a route (see createos/createostest/control.go). */
    async fault(fault) {
      const { status } = await request("POST", "/_control/faults", fault);
      if (status !== 200) throw new Error(`fault injection answered HTTP ${status}`);
    },
    async resetFaults() {
      await request("POST", "/_control/reset", {});
    },
    /** Directories of live sandboxes in the sim's data directory. */
    sandboxDirs() {
      const out = [];
      for (const top of readdirSync(dir)) {
        if (!top.startsWith("createostest-")) continue;
        try {
          for (const sb of readdirSync(path.join(dir, top))) out.push(path.join(top, sb));
        } catch { /* not a directory */ }
      }
      return out;
    },
  };
}

/** What /proc shows of pid, or null once it is gone. */
function processInfo(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const nspid = /^NSpid:\s*(.*)$/m.exec(status)?.[1].trim().split(/\s+/).map(Number) ?? [pid];
    const environ = readFileSync(`/proc/${pid}/environ`, "utf8");
    return {
      pid,
      nsPid: nspid[nspid.length - 1],
      pidNs: readlinkSync(`/proc/${pid}/ns/pid`),
      cmdline: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean),
      env: Object.fromEntries(environ.split("\0").filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)])),
    };
  } catch {
    return null;
  }
}

/** The live processes below pid (Linux /proc). */
export function descendants(pid) {
  const parent = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z") continue;
    parent.set(Number(name), Number(fields[1]));
  }
  const out = [];
  for (const p of parent.keys()) {
    for (let q = parent.get(p); q > 1; q = parent.get(q)) {
      if (q === pid) {
        out.push(p);
        break;
      }
    }
  }
  return out;
}

/**
 * Taps the host's logger (server/dist/middleware/logger.js, the one
 * plugin-worker-manager.js writes worker stderr, `log` notifications and its
 * own records through): every record at any level is parsed and kept instead
 * of written to stdout. Only records carrying pluginId are kept. restore()
 * puts the level and stream back.
 */
export async function captureHostLogs(pluginId) {
  const mod = await import(pathToFileURL(path.join(conformanceRoot, "node_modules", "@paperclipai", "server", "dist", "middleware", "logger.js")).href);
  const logger = mod.logger;
  const streamSym = Object.getOwnPropertySymbols(logger).find((s) => s.description === "pino.stream");
  if (!streamSym) throw new Error("the host logger has no pino.stream; pino changed");
  const savedStream = logger[streamSym];
  const savedLevel = logger.level;
  const records = [];
  logger[streamSym] = {
    write(line) {
      const record = JSON.parse(line);
      if (record.pluginId === pluginId) records.push({ ...record, raw: line });
    },
  };
  logger.level = "trace";
  return {
    records,
    restore() {
      logger.level = savedLevel;
      logger[streamSym] = savedStream;
    },
  };
}
