// Live sessions through the real host: duplex command channels and login
// pseudo-terminals, driven through the host's own session API
// (handle.openDuplexChannel / handle.openLoginPtySession of
// createPluginWorkerHandle in @paperclipai/server 2026.916.1), for the
// fake-plugin driver and for createos against createos-sim.
//
// The worker runs behind wire-tap.mjs, which records every JSON-RPC line,
// so the suite also sees what the session objects do not expose: how many
// exit frames a route got, the size and encoding of each data chunk, and
// the answer to every close the host sent on its own. The host logger is
// captured: the host retires a worker ("… retiring worker") on any
// ownership violation or unanswered close, and that must never happen.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { conformanceRoot, importManifest, instanceInfo, loader, packageDir, packageJson, processEnv, sdk, startHandle, waitFor, workerEntrypoint } from "./host.mjs";
import { captureHostLogs, descendants, skipSim, startSim } from "./createos-sim.mjs";

const { JsonRpcCallError } = sdk;
const here = path.dirname(fileURLToPath(import.meta.url));

// The live-session methods (plugin-sdk protocol.d.ts); a driver that
// declares the sessions must have every one in supportedMethods.
const SESSION_METHODS = [
  "duplexChannelOpen", "duplexChannelWrite", "duplexChannelStop", "duplexChannelClose",
  "loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose",
];
// Host bounds (plugin-worker-manager.js): one host write, one worker chunk.
const MAX_HOST_WRITE = 262_144;
const MAX_WORKER_CHUNK = 262_144;
// How long a condition may take before a test gives up and says what it
// waited for. Generous: these are not timing assertions, only a bound on a
// hang.
const PATIENCE = 30_000;

/** Resolves what p resolves to, or fails naming what after ms. */
async function within(p, ms, what) {
  let timer;
  try {
    return await Promise.race([p, new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms}ms waiting for ${what}`)), ms);
    })]);
  } finally {
    clearTimeout(timer);
  }
}

/** The JSON-RPC lines the tap recorded, parsed as they are appended. */
class Wire {
  constructor(file) {
    this.file = file;
    this.offset = 0;
    this.entries = [];
  }

  /** Every entry so far: { dir: "in" | "out", msg }. */
  read() {
    let buf;
    try {
      buf = readFileSync(this.file);
    } catch {
      return this.entries;
    }
    const end = buf.lastIndexOf(0x0a) + 1;
    if (end > this.offset) {
      for (const line of buf.subarray(this.offset, end).toString("utf8").split("\n")) {
        if (!line) continue;
        const { dir, line: raw } = JSON.parse(line);
        let msg;
        try {
          msg = JSON.parse(raw);
        } catch {
          msg = { unparsed: raw };
        }
        this.entries.push({ dir, msg });
      }
      this.offset = end;
    }
    return this.entries;
  }

  /** The host's requests for method whose params pass keep, each with the worker's answer (or undefined). */
  calls(method, keep = () => true) {
    const es = this.read();
    const answers = new Map();
    for (const { dir, msg } of es) {
      if (dir === "out" && msg.id !== undefined && msg.method === undefined) answers.set(msg.id, msg);
    }
    return es.filter(({ dir, msg }) => dir === "in" && msg.method === method && msg.id !== undefined && keep(msg.params ?? {}))
      .map(({ msg }) => ({ params: msg.params, answer: answers.get(msg.id) }));
  }

  /** The worker's notifications of method for a host route id. */
  notes(method, hostRouteId) {
    return this.read().filter(({ dir, msg }) => dir === "out" && msg.method === method && msg.params?.hostRouteId === hostRouteId)
      .map(({ msg }) => msg.params);
  }

  /** The bound pair of the duplex route whose open carried exactly this argv. */
  duplexRoute(command) {
    const opens = this.calls("duplexChannelOpen", (p) => JSON.stringify(p.command) === JSON.stringify(command));
    assert.equal(opens.length, 1, `one duplexChannelOpen with ${JSON.stringify(command)}`);
    const [{ params, answer }] = opens;
    assert.ok(answer?.result, `duplexChannelOpen answered: ${JSON.stringify(answer)}`);
    return { hostRouteId: params.hostRouteId, workerSessionId: answer.result.workerSessionId };
  }

  /** The bound pair of the login route whose open carried this session home. */
  loginRoute(sessionHome) {
    const opens = this.calls("loginPtyOpen", (p) => p.sessionHome === sessionHome);
    assert.equal(opens.length, 1, `one loginPtyOpen for ${sessionHome}`);
    const [{ params, answer }] = opens;
    assert.ok(answer?.result, `loginPtyOpen answered: ${JSON.stringify(answer)}`);
    return { hostRouteId: params.hostRouteId, workerSessionId: answer.result.workerSessionId };
  }
}

/** Collects a duplex session's bytes as they arrive. */
function collectBytes(session) {
  const parts = [];
  let length = 0;
  session.onData((chunk) => {
    parts.push(Buffer.from(chunk));
    length += chunk.byteLength;
  });
  return { get length() { return length; }, bytes: () => Buffer.concat(parts) };
}

/** Collects a login session's text as it arrives. */
function collectText(session) {
  let text = "";
  session.onData((chunk) => { text += chunk; });
  return { get text() { return text; } };
}

/** Pids of live processes whose environment carries the fake lease marker for root. */
function markedProcesses(root) {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
    if (processEnv(Number(name))?.PAPERCLIP_FAKE_LEASE_ROOT === root) out.push(Number(name));
  }
  return out;
}

// The stand-in for the Claude CLI a login runs (`claude setup-token`): it
// prints the terminal's size, its arguments and HOME, reads one typed line
// and echoes it, then exits 0. Both drivers' leases find it in tools (the
// fake through its config path, the sim through --mount and --path), and
// no other login CLI.
const fakeClaude = `#!/bin/sh
stty size
printf 'args:%s\\n' "$*"
printf 'home:%s\\n' "$HOME"
IFS= read -r line
printf 'typed:%s\\n' "$line"
`;
const tools = mkdtempSync(path.join(tmpdir(), "conformance-sessions-tools-"));
// Modes set whatever the umask: the sim and the sandboxes read these.
chmodSync(tools, 0o755);
writeFileSync(path.join(tools, "claude"), fakeClaude);
chmodSync(path.join(tools, "claude"), 0o755);
after(() => rmSync(tools, { recursive: true, force: true }));

/**
 * The suite, for one driver. profile gives:
 *   driverKey;
 *   config(): the config the lease gets, with what puts tools on its
 *     login PATH;
 *   leftProcesses(lease): the live processes the lease still has (after
 *     its destroy: must be none);
 *   afterDestroy(lease, homes): checks that nothing of the lease is left,
 *     the login session homes it used included.
 */
function sessionsSuite(profile) {
  describe(`${profile.driverKey}: live sessions through the host`, { skip: profile.skip }, () => {
    const pluginId = `plugin-${randomUUID()}`;
    const companyId = `company-${randomUUID()}`;
    const environmentId = `env-${randomUUID()}`;
    let scratch; // the tap's file
    let wire;
    let logs;
    let handle;
    let config;
    let lease; // the fake claude (and no other login CLI) on its login PATH
    const open = new Set(); // sessions not closed yet, for after()

    const base = () => ({ driverKey: profile.driverKey, companyId, environmentId, issueId: null, config });
    const sessionBase = (lease) => ({ driverKey: profile.driverKey, companyId, environmentId, providerLeaseId: lease.providerLeaseId });

    async function acquire() {
      const acquired = await handle.call("environmentAcquireLease", {
        ...base(), runId: randomUUID(), workspaceMode: "isolated_workspace", adapterType: "claude_local",
      }, 120_000);
      return { providerLeaseId: acquired.providerLeaseId, metadata: acquired.metadata };
    }
    async function destroy(l) {
      await handle.call("environmentDestroyLease", {
        ...base(), providerLeaseId: l.providerLeaseId, leaseMetadata: l.metadata,
      }, 120_000);
    }
    async function openDuplex(lease, command) {
      const s = await handle.openDuplexChannel({ ...sessionBase(lease), command });
      open.add(s);
      return s;
    }
    async function openLogin(lease, sessionHome, loginCommandKey = "claude") {
      const s = await handle.openLoginPtySession({ ...sessionBase(lease), loginCommandKey, sessionHome });
      open.add(s);
      return s;
    }
    async function close(s) {
      open.delete(s);
      await s.close();
    }
    const homes = []; // the session homes of the lease's logins
    const newSessionHome = () => {
      const home = `/tmp/paperclip-adapter-login/${randomUUID()}`;
      homes.push(home);
      return home;
    };
    const writesAcknowledged = () => waitFor(() => handle.diagnostics().pendingRequests === 0, PATIENCE, "the worker to answer every pending request");

    before(async () => {
      scratch = mkdtempSync(path.join(tmpdir(), `conformance-sessions-${profile.driverKey}-`));
      config = profile.config();
      const tapFile = path.join(scratch, "wire.jsonl");
      wire = new Wire(tapFile);
      logs = await captureHostLogs(pluginId);
      const manifest = await importManifest();
      handle = await startHandle(pluginId, {
        entrypointPath: path.join(here, "wire-tap.mjs"),
        env: {
          ...loader.buildPluginWorkerEnv({ manifest, packageName: packageJson.name, packagePath: packageDir, instanceInfo }),
          WIRE_TAP_ENTRY: workerEntrypoint,
          WIRE_TAP_FILE: tapFile,
        },
      });
      lease = await acquire();
    });
    after(async () => {
      for (const s of open) await s.close().catch(() => {});
      if (lease && !lease.destroyed) await destroy(lease).catch(() => {});
      if (handle?.status === "running") await handle.stop();
      logs?.restore();
      if (scratch) rmSync(scratch, { recursive: true, force: true });
    });

    test("the driver declares both sessions and the worker serves every session method", async () => {
      const manifest = await importManifest();
      const decl = manifest.environmentDrivers.find((d) => d.driverKey === profile.driverKey);
      assert.ok(decl, `the manifest declares ${profile.driverKey}`);
      // The host grants duplexCommandStream only when declared (it is opt-in)
      // and duplexChannelOpen is verified through supportedMethods
      // (environment-runtime.js classifyEnvironmentCapabilities).
      assert.equal(decl.sandboxCapabilities?.duplexCommandStream, true, JSON.stringify(decl.sandboxCapabilities));
      assert.equal(decl.supportsLoginPty, true);
      for (const m of SESSION_METHODS) assert.ok(handle.supportedMethods.includes(m), `supportedMethods lacks ${m}`);
    });

    test("duplex cat: every byte value, 0x00 and 0xFF included, comes back as sent", async () => {
      const command = ["cat"];
      const sent = Buffer.concat([Buffer.from([0x00, 0xff]), Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from([0xff, 0x00, 0x0d, 0x0a])]);
      const s = await openDuplex(lease, command);
      const got = collectBytes(s);
      s.write(new Uint8Array(sent));
      await waitFor(() => got.length >= sent.length, PATIENCE, `${sent.length} bytes back from cat`);
      assert.ok(got.bytes().equals(sent), `cat sent back ${got.bytes().toString("hex")}`);
      const route = wire.duplexRoute(command);
      for (const n of wire.notes("duplexChannel.data", route.hostRouteId)) {
        assert.equal(n.workerSessionId, route.workerSessionId);
        assert.equal(Buffer.from(n.chunk, "base64").toString("base64"), n.chunk, "standard padded base64");
      }
      s.kill();
      const exit = await within(s.wait(), PATIENCE, "cat to exit after duplexChannelStop");
      assert.ok(exit.exitCode === null || typeof exit.exitCode === "number", JSON.stringify(exit));
      await close(s);
      assert.equal(wire.notes("duplexChannel.exit", route.hostRouteId).length, 1, "one exit frame");
    });

    test("duplex cat: 600 KiB in 256 KiB writes arrives intact, in chunks the host accepts", async () => {
      const command = ["cat", "-"];
      const payload = randomBytes(600 * 1024);
      const s = await openDuplex(lease, command);
      const got = collectBytes(s);
      for (let at = 0; at < payload.length; at += MAX_HOST_WRITE) {
        s.write(new Uint8Array(payload.subarray(at, at + MAX_HOST_WRITE)));
        // The host holds at most 393,216 unacknowledged bytes on a route
        // and ends the route past that: the next write waits for the answer.
        await writesAcknowledged();
      }
      await waitFor(() => got.length >= payload.length, PATIENCE, `${payload.length} bytes back from cat (have ${got.length})`);
      assert.equal(got.length, payload.length);
      assert.ok(got.bytes().equals(payload), "the payload came back byte for byte");
      const route = wire.duplexRoute(command);
      const writes = wire.calls("duplexChannelWrite", (p) => p.hostRouteId === route.hostRouteId);
      assert.equal(writes.length, 3);
      for (const w of writes) assert.equal(w.answer?.result, null, `duplexChannelWrite answered ${JSON.stringify(w.answer)}`);
      const chunks = wire.notes("duplexChannel.data", route.hostRouteId);
      for (const n of chunks) {
        const bytes = Buffer.from(n.chunk, "base64");
        assert.ok(bytes.length > 0 && bytes.length <= MAX_WORKER_CHUNK, `a data chunk of ${bytes.length} bytes`);
      }
      s.kill();
      await within(s.wait(), PATIENCE, "cat to exit after duplexChannelStop");
      await close(s);
    });

    test("duplex argv: shell metacharacters arrive literally; the output is complete when the exit arrives", async () => {
      const args = ["$(id)", "a;b", "'q'", "`uname`", "\"dq\" \\ *", "$HOME", " spaced ", "two\nlines", "|&>", "%s"];
      const command = ["printf", "%s\\n", ...args];
      const s = await openDuplex(lease, command);
      const got = collectBytes(s);
      const exit = await within(s.wait(), PATIENCE, "printf to exit");
      assert.deepEqual(exit, { exitCode: 0 });
      assert.equal(got.bytes().toString("utf8"), args.map((a) => `${a}\n`).join(""));
      await close(s);
      const route = wire.duplexRoute(command);
      assert.equal(wire.notes("duplexChannel.exit", route.hostRouteId).length, 1, "one exit frame");
    });

    test("duplex exit code: sh -c 'exit 7' gives { exitCode: 7 }, once", async () => {
      const command = ["sh", "-c", "printf 'last words'; exit 7"];
      const s = await openDuplex(lease, command);
      const got = collectBytes(s);
      const exit = await within(s.wait(), PATIENCE, "sh to exit");
      assert.deepEqual(exit, { exitCode: 7 });
      assert.equal(got.bytes().toString("utf8"), "last words", "the data came before the exit");
      const route = wire.duplexRoute(command);
      await close(s);
      const exits = wire.notes("duplexChannel.exit", route.hostRouteId);
      assert.equal(exits.length, 1, `exit frames: ${JSON.stringify(exits)}`);
      assert.deepEqual({ ...exits[0], transportClosed: exits[0].transportClosed ?? false },
        { ...route, exitCode: 7, transportClosed: false });
    });

    test("closes: twice, of a closed route, and of routes never opened are all acknowledged", async () => {
      // Twice through the session: the host sends one close and checks its ack.
      const command = ["sh", "-c", "exit 0"];
      const s = await openDuplex(lease, command);
      assert.deepEqual(await within(s.wait(), PATIENCE, "sh to exit"), { exitCode: 0 });
      await close(s);
      await s.close();
      const route = wire.duplexRoute(command);
      const closes = wire.calls("duplexChannelClose", (p) => p.hostRouteId === route.hostRouteId);
      assert.equal(closes.length, 1);
      assert.deepEqual(closes[0].answer?.result, route, "the close ack carries the bound pair");
      // Again, straight to the worker, for the closed route.
      const again = await handle.call("duplexChannelClose", { hostRouteId: route.hostRouteId }, 10_000);
      assert.equal(again.hostRouteId, route.hostRouteId);
      if (again.workerSessionId !== undefined) assert.equal(again.workerSessionId, route.workerSessionId);
      // Routes the worker never saw opened.
      const neverDuplex = `duplex-route-never-${randomUUID()}`;
      assert.deepEqual(await handle.call("duplexChannelClose", { hostRouteId: neverDuplex }, 10_000), { hostRouteId: neverDuplex });
      const neverLogin = randomUUID();
      assert.deepEqual(await handle.call("loginPtyClose", { hostRouteId: neverLogin }, 10_000), { hostRouteId: neverLogin });

      // An open the worker refuses (no such lease): the host closes the route
      // it reserved on its own and retires the worker unless that close is
      // answered within 10 s.
      const ghost = { providerLeaseId: `${lease.providerLeaseId}-gone` };
      await assert.rejects(handle.openDuplexChannel({ ...sessionBase(ghost), command: ["true"] }), (err) => err instanceof JsonRpcCallError);
      await assert.rejects(handle.openLoginPtySession({ ...sessionBase(ghost), loginCommandKey: "claude", sessionHome: newSessionHome() }),
        (err) => err instanceof JsonRpcCallError);
      for (const method of ["duplexChannelOpen", "loginPtyOpen"]) {
        const [refused] = wire.calls(method, (p) => p.providerLeaseId === ghost.providerLeaseId);
        assert.ok(refused?.answer?.error, `${method} on a gone lease is refused: ${JSON.stringify(refused?.answer)}`);
        const closeMethod = method === "duplexChannelOpen" ? "duplexChannelClose" : "loginPtyClose";
        await waitFor(() => wire.calls(closeMethod, (p) => p.hostRouteId === refused.params.hostRouteId)[0]?.answer, 10_000,
          `the worker to answer the host's ${closeMethod} after the refused open`);
        const [ack] = wire.calls(closeMethod, (p) => p.hostRouteId === refused.params.hostRouteId);
        // What the host checks of an unbound route's ack: its hostRouteId.
        assert.equal(ack.answer.result?.hostRouteId, refused.params.hostRouteId, JSON.stringify(ack.answer));
        const frames = method === "duplexChannelOpen" ? ["duplexChannel.data", "duplexChannel.exit"] : ["loginPty.output", "loginPty.exit"];
        for (const f of frames) assert.deepEqual(wire.notes(f, refused.params.hostRouteId), [], `no ${f} for a refused open`);
      }
    });

    test("login PTY: 30 rows × 120 columns, the typed line reaches the CLI, HOME is the session home", async () => {
      const home = newSessionHome();
      const s = await openLogin(lease, home);
      const out = collectText(s);
      await waitFor(() => out.text.includes("home:"), PATIENCE, `the fake claude to start (output so far ${JSON.stringify(out.text)})`);
      s.write("hello from the host\r");
      const exit = await within(s.wait(), PATIENCE, "the fake claude to exit");
      assert.deepEqual(exit, { exitCode: 0 }, `output: ${JSON.stringify(out.text)}`);
      const text = out.text;
      assert.match(text, /(^|\n)30 120\r?\n/, `stty size: ${JSON.stringify(text)}`);
      assert.match(text, /args:setup-token\r?\n/);
      assert.ok(text.includes(`home:${home}\r\n`) || text.includes(`home:${home}\n`), `HOME: ${JSON.stringify(text)}`);
      assert.match(text, /typed:hello from the host\r?\n/, "the typed line, complete when the exit arrived");
      const route = wire.loginRoute(home);
      await close(s);
      assert.equal(wire.notes("loginPty.exit", route.hostRouteId).length, 1, "one exit frame");
      const closes = wire.calls("loginPtyClose", (p) => p.hostRouteId === route.hostRouteId);
      assert.deepEqual(closes.map((c) => c.answer?.result), [{ hostRouteId: route.hostRouteId }]);
      for (const n of wire.notes("loginPty.output", route.hostRouteId)) assert.equal(n.workerSessionId, route.workerSessionId);
    });

    test("login PTY: a CLI that is not installed exits 127", async () => {
      // Only claude is on the lease's login PATH; codex is nowhere.
      const home = newSessionHome();
      const s = await openLogin(lease, home, "codex");
      const out = collectText(s);
      const exit = await within(s.wait(), PATIENCE, "the missing CLI's exit");
      assert.deepEqual(exit, { exitCode: 127 }, `output: ${JSON.stringify(out.text)}`);
      await close(s);
      assert.equal(wire.notes("loginPty.exit", wire.loginRoute(home).hostRouteId).length, 1);
    });

    test("login PTY: the worker refuses a session home of another shape itself", async () => {
      // The host validates the home before its call; the worker checks again
      // before it touches anything. Straight to the worker, past the host's check.
      for (const sessionHome of ["/tmp/paperclip-adapter-login/../../etc", "/tmp/paperclip-adapter-login/x;id", "/root"]) {
        const hostRouteId = randomUUID();
        await assert.rejects(handle.call("loginPtyOpen", {
          hostRouteId, ...sessionBase(lease), loginCommandKey: "claude", sessionHome,
        }, 30_000), (err) => err instanceof JsonRpcCallError, sessionHome);
        assert.deepEqual(await handle.call("loginPtyClose", { hostRouteId }, 10_000), { hostRouteId });
        assert.deepEqual(wire.notes("loginPty.output", hostRouteId), [], `no output for ${sessionHome}`);
      }
    });

    test("destroying the lease ends every session on it and leaves no process", async () => {
      const cat = await openDuplex(lease, ["cat"]);
      const tree = await openDuplex(lease, ["sh", "-c", "sleep 300 & sleep 300 & wait"]);
      const login = await openLogin(lease, newSessionHome());
      const loginOut = collectText(login);
      await waitFor(() => loginOut.text.includes("home:"), PATIENCE, "the fake claude to wait for input");
      assert.ok(profile.leftProcesses(lease).length > 0, "the sessions' processes run before the destroy");
      await destroy(lease);
      lease.destroyed = true;
      for (const [name, s] of [["cat", cat], ["sleep tree", tree], ["login", login]]) {
        await within(s.wait(), PATIENCE, `the ${name} session to end with its lease`);
        await close(s);
      }
      await waitFor(() => profile.leftProcesses(lease).length === 0, PATIENCE,
        () => `no process of the destroyed lease (left: ${profile.leftProcesses(lease)})`);
      await profile.afterDestroy(lease, homes);
      // A session on the destroyed lease is refused, and its route closed.
      await assert.rejects(handle.openDuplexChannel({ ...sessionBase(lease), command: ["true"] }));
    });

    test("the worker was never retired, answered every close, and still answers health", async () => {
      const retired = logs.records.filter((r) => /retiring worker|ownership violation/.test(r.msg ?? ""));
      assert.deepEqual(retired.map((r) => r.msg), []);
      assert.equal(handle.status, "running");
      assert.equal((await handle.call("health", {})).status, "ok");
      for (const method of ["duplexChannelClose", "loginPtyClose"]) {
        for (const c of wire.calls(method)) assert.ok(c.answer?.result?.hostRouteId === c.params.hostRouteId, `${method} ${JSON.stringify(c)}`);
      }
      assert.equal(handle.diagnostics().pendingRequests, 0);
      await handle.stop();
      assert.equal(handle.status, "stopped");
    });
  });
}

// ---------------------------------------------------------------------------
// fake-plugin: local temp-dir sandboxes; `path` (dirs searched before the
// default PATH) puts the fake claude on the lease's PATH.
sessionsSuite({
  driverKey: "fake-plugin",
  skip: process.platform !== "linux" && "the process checks read /proc",
  config: () => ({ image: "fake:conformance", timeoutMs: 20_000, reuseLease: false, path: [tools] }),
  leftProcesses: (lease) => markedProcesses(lease.metadata.fakeRootDir),
  // The fake's sandbox is this machine: a login's HOME, with whatever
  // credentials the CLI wrote there, must go with the lease.
  async afterDestroy(lease, homes) {
    assert.equal(existsSync(lease.metadata.fakeRootDir), false, "the lease root is removed");
    assert.ok(homes.length >= 2);
    for (const home of homes) assert.equal(existsSync(home), false, `the session home ${home} is removed with the lease`);
  },
});

// ---------------------------------------------------------------------------
// createos against createos-sim (needs root or CAP_SYS_ADMIN for the sim's
// namespaces, as createos.test.mjs).
const simBin = process.env.CREATEOS_SIM_BIN || path.join(conformanceRoot, "..", "bin", "createos-sim");
const simKey = `conformance-sessions-${randomBytes(12).toString("hex")}`;
const SIM_TOOLS = "/paperclip-sessions-tools";
let simSkip = false;
let sim = null;
if (process.platform !== "linux") simSkip = skipSim("createos-sim runs sandbox commands in Linux namespaces");
else if (!existsSync(simBin)) simSkip = skipSim(`no createos-sim at ${simBin}: run "make conformance" or set CREATEOS_SIM_BIN`);
else {
  // The sim shows the tools in every sandbox and puts them first on PATH.
  const started = await startSim({ bin: simBin, key: simKey, mounts: [`${tools}:${SIM_TOOLS}`], paths: [SIM_TOOLS] });
  if (started.unavailable) simSkip = skipSim(`createos-sim cannot isolate sandboxes here (needs root or CAP_SYS_ADMIN): ${started.unavailable}`);
  else sim = started;
}
after(async () => {
  if (sim) {
    await sim.stop();
    sim.removeDir();
  }
});

/** The live processes under the sim that belong to sandbox id: its init, its command supervisors and what they run. */
function simProcessesOf(id) {
  if (!sim) return [];
  const cmdline = (pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    } catch {
      return [];
    }
  };
  const parentOf = (pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    } catch {
      return 0;
    }
  };
  const mine = (pid) => cmdline(pid).some((a) => a.endsWith(`/${id}/root`));
  return descendants(sim.pid).filter((pid) => {
    for (let p = pid; p > 1 && p !== sim.pid; p = parentOf(p)) if (mine(p)) return true;
    return false;
  });
}

sessionsSuite({
  driverKey: "createos",
  skip: simSkip,
  config: () => ({ apiUrl: sim.url, apiKey: simKey, shape: "s-1vcpu-1gb", timeoutMs: 60_000, reuseLease: false }),
  leftProcesses: (lease) => simProcessesOf(lease.providerLeaseId),
  async afterDestroy(lease) {
    assert.equal(await sim.status(lease.providerLeaseId), "gone", "the sandbox, session homes and all, is deleted");
  },
});
