// The createos driver through the real host: the packaged worker under the
// host's createPluginWorkerHandle, driven through a whole lease against
// createos-sim (a local fake CreateOS whose sandboxes run real commands in
// private namespaces). It mirrors e2e/createos_test.go, with params shaped as
// environment-runtime.js and plugin-environment-driver.js shape them.
//
// `make conformance` builds bin/createos-sim and passes it as
// CREATEOS_SIM_BIN. The sim needs root (or CAP_SYS_ADMIN) on Linux; where it
// reports that namespaces are unavailable, this file's tests are skipped,
// except where they must run (Linux as root, or CREATEOS_ISOLATION_REQUIRED=1):
// there that is a failure.
import assert from "node:assert/strict";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { childPids, conformanceRoot, environmentDriver, isAlive, sdk, startHandle, waitFor } from "./host.mjs";
import { captureHostLogs, descendants, skipSim, startSim } from "./createos-sim.mjs";

const { JsonRpcCallError } = sdk;
const DRIVER = "createos";
const PLUGIN_KEY = "paperclip.go-sandbox-provider";
const companyId = `company-${randomUUID()}`;
const environmentId = `env-${randomUUID()}`;
const key = `conformance-createos-${randomBytes(12).toString("hex")}`;
const wrongKey = `conformance-wrong-${randomBytes(12).toString("hex")}`;

const simBin = process.env.CREATEOS_SIM_BIN || path.join(conformanceRoot, "..", "bin", "createos-sim");
let sim = null;
let skip = false;
if (process.platform !== "linux") {
  skip = skipSim("createos-sim runs sandbox commands in Linux mount and PID namespaces");
} else if (!process.env.CREATEOS_SIM_BIN && !existsSync(simBin)) {
  skip = skipSim(`no createos-sim at ${simBin}: run "make conformance" (it builds bin/createos-sim) or set CREATEOS_SIM_BIN`);
} else {
  const started = await startSim({ bin: simBin, key });
  if (started.unavailable) skip = skipSim(`createos-sim cannot isolate sandboxes here (needs root or CAP_SYS_ADMIN): ${started.unavailable}`);
  else sim = started;
}
after(async () => {
  // Whatever happened above: nothing of the sim is left behind.
  if (sim) {
    await sim.stop();
    sim.removeDir();
  }
});

describe("createos lease through the host against createos-sim", { skip }, () => {
  const pluginId = `plugin-${randomUUID()}`;
  const hostport = () => sim.url.replace(/^http:\/\//, "");
  let logs;
  let handle;
  let goPid;
  let workerConfig; // what the host sends as params.config: the saved config, secret resolved, envelope stripped
  let storedConfig; // what the host persists (and spreads into lease metadata): the key is a secret reference
  const workerErrors = []; // { method, message, data } of every call the worker failed
  const results = []; // { method, result } of every call, for the transcript checks
  const sandboxIds = new Set();

  // The host's RPC budgets: execute is (timeoutMs or config.timeoutMs) + 30 s;
  // acquire, realize, release and destroy use config.timeoutMs + 30 s;
  // resume caps that at 60 s.
  const budget = (requestedTimeoutMs) =>
    environmentDriver.resolvePluginExecuteRpcTimeoutMs({ requestedTimeoutMs, config: workerConfig });
  // Sync (environment-runtime.js resolvePluginSandboxRpcTimeoutMs): the
  // larger of config.timeoutMs and config.bridgeRequestTimeoutMs, + 30 s.
  const syncBudget = () => budget(Math.max(...[workerConfig.timeoutMs, workerConfig.bridgeRequestTimeoutMs]
    .filter((v) => typeof v === "number" && Number.isFinite(v) && v > 0).map(Math.trunc)));
  const base = () => ({ driverKey: DRIVER, companyId, environmentId, issueId: null, config: workerConfig });

  async function call(method, params, timeoutMs, sink) {
    try {
      const result = await handle.call(method, params, timeoutMs, sink);
      results.push({ method, result });
      return result;
    } catch (err) {
      workerErrors.push({ method, message: String(err?.message ?? err), data: err?.data, code: err?.code });
      throw err;
    }
  }

  // environment-runtime.js persists the worker's metadata over the host's own
  // keys (agentId first when the run has an agent; executionWorkspaceMode is
  // null for a run without an execution workspace) and the saved config, and
  // hands it back on every later call.
  function hostMetadata(workerMetadata, outcome, { agentId, executionWorkspaceMode = "isolated_workspace" } = {}) {
    return {
      ...(agentId ? { agentId } : {}),
      driver: "sandbox", executionWorkspaceMode, pluginId, pluginKey: PLUGIN_KEY, sandboxProviderPlugin: true,
      ...storedConfig, ...workerMetadata, sandboxLeaseAcquisition: { outcome },
    };
  }
  const leaseArg = (providerLeaseId, metadata) => ({ providerLeaseId, metadata, expiresAt: null });

  // The sim's request log, in windows: mark() before a step, routesSince()
  // after it (sim.state and the control API are not requests, so they do
  // not show up here).
  const mark = async () => (await sim.requests()).length;
  const routesSince = async (n) => (await sim.requestsSince(n)).map((r) => r.route);
  // The managed-process routes (E10–E16): v0.3 runs ordinary commands, the
  // probe's and the sync commands over one streaming exec each, so a lease
  // with no session never uses them.
  const managedRoute = (route) => route.startsWith("process.");
  const tally = (routes) => {
    const n = new Map();
    for (const r of routes) n.set(r, (n.get(r) ?? 0) + 1);
    return [...n].map(([r, k]) => `${r} ${k}`).join(", ");
  };

  // The call fails in the worker with a message matching re.
  async function rejectsWith(promise, re) {
    await assert.rejects(promise, (err) => {
      assert.ok(err instanceof JsonRpcCallError, `${err?.name}: ${err?.message}`);
      assert.match(err.message, re);
      return true;
    });
  }

  let syncHost = null; // the host side of the sync step
  after(async () => {
    if (handle?.status === "running") await handle.stop();
    logs?.restore();
    if (syncHost) rmSync(syncHost, { recursive: true, force: true });
  });

  const streamed = (chunks, stream) => chunks.filter((c) => c.stream === stream).map((c) => c.chunk).join("");

  test("start: the worker runs under the host with the createos methods", async () => {
    logs = await captureHostLogs(pluginId);
    handle = await startHandle(pluginId);
    [goPid] = childPids(handle.diagnostics().pid);
    assert.equal(handle.status, "running");
    for (const m of ["environmentValidateConfig", "environmentProbe", "environmentAcquireLease", "environmentRealizeWorkspace",
      "environmentExecute", "environmentReleaseLease", "environmentResumeLease", "environmentDestroyLease",
      "environmentSyncIn", "environmentSyncOut"]) {
      assert.ok(handle.supportedMethods.includes(m), `supportedMethods lacks ${m}`);
    }
    await waitFor(() => logs.records.some((r) => r.msg === "[plugin] CreateOS sandbox provider ready"), 5000,
      "the worker's CreateOS ready log to reach the host logger");
  });

  test("validateConfig: the sim's loopback origin and an explicit key; plain HTTP elsewhere is refused", async () => {
    const submitted = { apiUrl: `${sim.url}/v1/`, apiKey: key, shape: "s-1vcpu-1gb", timeoutMs: 20_000, reuseLease: true };
    const validated = await call("environmentValidateConfig", { driverKey: DRIVER, config: submitted });
    assert.equal(validated.ok, true, JSON.stringify(validated.errors));
    const nc = validated.normalizedConfig;
    // The host persists normalizedConfig as the config, so the secret field stays.
    assert.equal(nc.apiUrl, sim.url, "the URL is normalised to its origin");
    assert.equal(nc.apiKey, key);
    assert.equal(nc.shape, "s-1vcpu-1gb");
    assert.equal(nc.timeoutMs, 20_000);
    assert.equal(nc.reuseLease, true);
    workerConfig = { ...nc };
    // The host stores the key as a company secret; the lease metadata it
    // builds from the saved config carries the reference, not the key.
    storedConfig = { provider: DRIVER, ...nc, apiKey: randomUUID() };

    const remote = await call("environmentValidateConfig", { driverKey: DRIVER, config: { ...submitted, apiUrl: "http://sim.example.com" } });
    assert.equal(remote.ok, false);
    assert.match(remote.errors[0], /HTTP is allowed on loopback only/);
  });

  test("probe: creates a sandbox, runs a command in it and deletes it", async () => {
    const probe = await call("environmentProbe", { driverKey: DRIVER, companyId, environmentId, config: workerConfig }, 120_000);
    assert.equal(probe.ok, true, JSON.stringify(probe));
    assert.equal(probe.summary, "CreateOS sandbox creation and command execution succeeded. Answered by the Go Sandbox Provider plugin (paperclip.go-sandbox-provider).");
    assert.deepEqual(probe.metadata, { provider: DRIVER, pluginKey: "paperclip.go-sandbox-provider" });
  });

  test("lease: acquire, realize, streamed execute, timed-out execute, sync in and out, release (kept warm), resume, idle pause, resume, destroy", async (t) => {
    // A heartbeat's acquire (environment-runtime.js, the plugin-sandbox
    // path): the run's agent and execution workspace, so the host will look
    // for this lease to resume it.
    const agentId = randomUUID();
    const leaseStarted = Date.now();
    const acquireMark = await mark();
    const acquired = await call("environmentAcquireLease", {
      ...base(), runId: randomUUID(), workspaceMode: "isolated_workspace", agentId, executionWorkspaceId: randomUUID(),
      adapterType: "claude_local",
    }, budget());
    const id = acquired.providerLeaseId;
    assert.ok(typeof id === "string" && id.length > 0, JSON.stringify(acquired));
    sandboxIds.add(id);
    const md = acquired.metadata;
    assert.equal(md.provider, DRIVER);
    assert.equal(md.apiOriginSha256, createHash("sha256").update(sim.url).digest("hex"), "the lease records the origin's fingerprint");
    assert.equal(md.apiUrl, undefined, "the lease metadata does not record the URL");
    assert.equal(md.apiKey, undefined);
    // The host can resume it: it has a reuse scope and the config's idle window.
    assert.match(String(md.reuseScope), /^paperclip-[0-9a-f]{24}$/, JSON.stringify(md));
    assert.equal(md.autoPauseAfterSeconds, workerConfig.autoPauseAfterSeconds);
    assert.equal(await sim.state(id), "running");
    // Three requests (the catalog's default rootfs is cached since the
    // probe): the create, one exec that makes the workspace and writes the
    // marker, and the list of the scope's sandboxes to reap.
    assert.deepEqual(await routesSince(acquireMark), ["sandbox.create", "exec", "sandbox.list"]);
    let lease = leaseArg(id, hostMetadata(md, "created", { agentId }));

    const realized = await call("environmentRealizeWorkspace", {
      ...base(), lease,
      workspace: { localPath: "/nonexistent/host/workspace", remotePath: undefined, mode: "isolated_workspace", metadata: {} },
    }, budget());
    assert.equal(realized.cwd, "/paperclip-workspace");

    // A real command with stdin and env; the host's execute.log sink sees
    // the output live, in full.
    const chunks = [];
    const script = `cat > kept.txt; printf '%s\\n' "$GREETING"; printf 'err:%s' "$GREETING" >&2; cat kept.txt; pwd`;
    const execMark = await mark();
    const executed = await call("environmentExecute", {
      ...base(), lease, command: "/bin/bash", args: ["-c", script], cwd: realized.cwd, env: { GREETING: "hello conformance" },
      stdin: "from stdin ✓\n", timeoutMs: 10_000, bypassSession: false,
    }, budget(10_000), (stream, chunk) => { chunks.push({ stream, chunk }); });
    const wantOut = "hello conformance\nfrom stdin ✓\n/paperclip-workspace\n";
    assert.equal(executed.exitCode, 0);
    assert.equal(executed.timedOut, false);
    assert.equal(executed.stdout, wantOut);
    assert.equal(executed.stderr, "err:hello conformance");
    assert.equal(streamed(chunks, "stdout"), wantOut, "execute.log stdout reached the host sink in full");
    assert.equal(streamed(chunks, "stderr"), "err:hello conformance", "execute.log stderr reached the host sink in full");
    // One request (v0.3 executeStream): the streaming exec, the command in
    // its body as the launcher's data (createos/launch: the specification
    // in NUL-terminated fields, then the command's stdin).
    const execRequests = await sim.requestsSince(execMark);
    assert.deepEqual(execRequests.map((r) => r.route), ["exec.stream"], "an ordinary command is one streaming exec");
    const execBody = JSON.parse(execRequests[0].body);
    assert.ok(execBody.stdin.startsWith("sandbox-plugin launch 1\0/paperclip-workspace\0" + "1\0"), "the command's specification travels in the streaming exec's body");
    assert.ok(execBody.stdin.endsWith(`\0${script}\0from stdin ✓\n`), "its argv, then its stdin, travel in the streaming exec's body");

    // Past its timeout: a timed-out result with the output so far, streamed
    // as it came. v0.3 has no process-tree DELETE: the driver aborts the
    // streaming exec, and the provider ends a command whose request is
    // dropped. The command's process is watched for in the sandbox while it
    // runs (tagged by an env value only it carries), so that its absence
    // afterwards means something.
    const partial = [];
    const tag = randomUUID();
    let running = null; // the command's process, as /proc showed it while it ran
    // Until bash has exec'd sleep, the tagged process is still bash -c.
    const seenRunning = waitFor(() => (running = sim.processes().find((p) => p.env.CONFORMANCE_TIMEOUT_TAG === tag && p.cmdline[0] === "sleep")), 15_000,
      "the timed-out command's process (sleep 30) in the sandbox");
    seenRunning.catch(() => {}); // awaited below
    const timeoutMark = await mark();
    const t0 = Date.now();
    const timedOut = await call("environmentExecute", {
      ...base(), lease, command: "/bin/bash", args: ["-c", "echo started; exec sleep 30"], cwd: realized.cwd,
      env: { CONFORMANCE_TIMEOUT_TAG: tag }, timeoutMs: 2000, bypassSession: false,
    }, budget(2000), (stream, chunk) => { partial.push({ stream, chunk }); });
    const took = Date.now() - t0;
    assert.equal(timedOut.timedOut, true, JSON.stringify(timedOut));
    assert.equal(timedOut.exitCode ?? null, null);
    assert.equal(timedOut.stdout, "started\n");
    assert.equal(streamed(partial, "stdout"), "started\n");
    assert.ok(took < 10_000, `the timed-out execute took ${took}ms`);
    await seenRunning;
    assert.deepEqual(running.cmdline, ["sleep", "30"], JSON.stringify(running));
    assert.notEqual(running.pidNs, readlinkSync("/proc/self/ns/pid"), "the command ran in the sandbox's own PID namespace");
    const timeoutRoutes = await routesSince(timeoutMark);
    assert.deepEqual(timeoutRoutes, ["exec.stream"], "the timed-out command was one streaming exec and no managed-process route");
    // Once the request is cut, nothing of the command is left in the
    // sandbox: its PID namespace holds its init alone (the sandbox itself
    // keeps running for the next command).
    const inSandbox = () => sim.processes().filter((p) => p.pidNs === running.pidNs);
    const goneAt = Date.now();
    await waitFor(() => inSandbox().every((p) => p.nsPid === 1), 5000,
      () => `the sandbox to hold only its init, not ${JSON.stringify(inSandbox().map(({ nsPid, cmdline }) => ({ nsPid, cmdline })))}`);
    t.diagnostic(`timed-out execute: ${took}ms; its process gone from the sandbox ${Date.now() - goneAt}ms after the result`);
    assert.equal(inSandbox().filter((p) => p.nsPid === 1).length, 1, "the sandbox's init is still there");
    assert.equal(sim.processes().some((p) => p.env.CONFORMANCE_TIMEOUT_TAG === tag), false);
    assert.equal(await sim.state(id), "running");

    // Native file sync both ways, params shaped as environment-runtime.js
    // callPluginEnvironmentSync sends them: the base params, the lease as
    // persisted and PluginSyncOperation[]. In goes a directory tree (a
    // nested file, an executable, a relative symlink, a file an exclude glob
    // drops) with a post-upload command that lists what landed.
    const syncStarted = Date.now();
    const syncMark = await mark();
    syncHost = mkdtempSync(path.join(tmpdir(), "conformance-createos-sync-"));
    const src = path.join(syncHost, "src");
    const put = (rel, content, mode) => {
      const p = path.join(src, rel);
      mkdirSync(path.dirname(p), { recursive: true });
      writeFileSync(p, content, { mode });
      chmodSync(p, mode); // whatever the umask
    };
    const readme = "synced readme\n";
    const deep = "deep ✓\n";
    const runScript = "#!/bin/sh\necho \"ran $1\"\n";
    put("README.md", readme, 0o644);
    put("lib/nested/deep.txt", deep, 0o600);
    put("bin/run.sh", runScript, 0o755);
    put("secret.env", "x".repeat(256 << 10), 0o644); // excluded: its bytes must not travel
    symlinkSync("lib/nested/deep.txt", path.join(src, "link"));
    const syncRoot = "/paperclip-workspace/sync";
    const syncedIn = await call("environmentSyncIn", {
      ...base(), lease,
      operations: [{
        operationId: "sync-op-1",
        files: [{ sourcePath: src, targetPath: `${syncRoot}/project`, kind: "directory", exclude: ["*.env"] }],
        postUploadCommands: [{
          command: "find . -mindepth 1 -printf '%p %y\\n' | LC_ALL=C sort > ../listing.txt && ./bin/run.sh post-upload >> ../listing.txt",
          cwd: `${syncRoot}/project`, timeoutMs: 10_000,
        }],
      }],
    }, syncBudget());
    assert.equal(syncedIn.operations.length, 1, JSON.stringify(syncedIn));
    const [inOp] = syncedIn.operations;
    assert.equal(inOp.operationId, "sync-op-1");
    // Three regular files (the symlink and the excluded file are not
    // counted); the bytes are the archive's, without the 256 KiB excluded file.
    assert.equal(inOp.filesTransferred, 3, JSON.stringify(inOp));
    const inMin = Buffer.byteLength(readme + deep + runScript);
    assert.ok(inOp.bytesTransferred >= inMin && inOp.bytesTransferred < 64 << 10, JSON.stringify(inOp));

    // An execute reads the synced files and produces a file and a directory.
    const readBack = await call("environmentExecute", {
      ...base(), lease, command: "/bin/bash", cwd: syncRoot, timeoutMs: 10_000, bypassSession: false,
      args: ["-c", [
        "cat listing.txt",
        "stat -c '%a %n' project project/README.md project/bin/run.sh project/lib/nested/deep.txt",
        "readlink project/link; cat project/link",
        "test -e project/secret.env || echo 'secret.env excluded'",
        "mkdir -p out/logs && cat project/README.md project/link > out/summary.txt && chmod 0640 out/summary.txt",
        "cp project/bin/run.sh out/tool.sh && chmod 0750 out/tool.sh && project/bin/run.sh out > out/logs/run.log",
        "ln -s logs/run.log out/latest && echo scratch > out/skip.tmp",
        "wc -l < listing.txt > result.txt",
      ].join("\n")],
    }, budget(10_000), () => {});
    assert.equal(readBack.exitCode, 0, JSON.stringify(readBack));
    assert.equal(readBack.stdout,
      "./README.md f\n./bin d\n./bin/run.sh f\n./lib d\n./lib/nested d\n./lib/nested/deep.txt f\n./link l\nran post-upload\n" +
      "755 project\n644 project/README.md\n755 project/bin/run.sh\n600 project/lib/nested/deep.txt\n" +
      `lib/nested/deep.txt\n${deep}secret.env excluded\n`);

    // Out come the file and the directory, to host paths whose parent does
    // not exist yet, with the modes asked for.
    const back = path.join(syncHost, "back");
    const syncedOut = await call("environmentSyncOut", {
      ...base(), lease,
      operations: [{
        operationId: "sync-op-2",
        files: [
          { sourcePath: `${syncRoot}/result.txt`, targetPath: path.join(back, "result.txt"), kind: "file", mode: 0o640 },
          { sourcePath: `${syncRoot}/out`, targetPath: path.join(back, "out"), kind: "directory", mode: 0o700, exclude: ["*.tmp"] },
        ],
      }],
    }, syncBudget());
    assert.equal(syncedOut.operations.length, 1, JSON.stringify(syncedOut));
    const [outOp] = syncedOut.operations;
    assert.equal(outOp.operationId, "sync-op-2");
    assert.equal(outOp.filesTransferred, 4, JSON.stringify(outOp)); // result.txt, summary.txt, tool.sh, logs/run.log
    const summary = readme + deep;
    const outMin = Buffer.byteLength("8\n" + summary + runScript + "ran out\n");
    assert.ok(outOp.bytesTransferred >= outMin && outOp.bytesTransferred < 64 << 10, JSON.stringify(outOp));
    const hostFile = (rel, content, mode) => {
      const st = lstatSync(path.join(back, rel));
      assert.ok(st.isFile(), `${rel} is a regular file`);
      assert.equal(st.mode & 0o777, mode, `${rel} mode ${(st.mode & 0o777).toString(8)}`);
      assert.equal(readFileSync(path.join(back, rel), "utf8"), content, rel);
    };
    hostFile("result.txt", "8\n", 0o640);
    hostFile("out/summary.txt", summary, 0o640);
    hostFile("out/tool.sh", runScript, 0o750);
    hostFile("out/logs/run.log", "ran out\n", 0o644);
    const outDir = lstatSync(path.join(back, "out"));
    assert.ok(outDir.isDirectory());
    assert.equal(outDir.mode & 0o777, 0o700, `out mode ${(outDir.mode & 0o777).toString(8)}`);
    assert.equal(readlinkSync(path.join(back, "out", "latest")), "logs/run.log");
    assert.equal(existsSync(path.join(back, "out", "skip.tmp")), false, "the exclude glob dropped skip.tmp");
    assert.deepEqual(readdirSync(back).sort(), ["out", "result.txt"], "nothing but the targets landed on the host");
    // No transfer scratch file is left in the sandbox's /tmp (its directory in the sim).
    const sandboxTmp = sim.sandboxDirs().filter((d) => d.endsWith(`/${id}`)).map((d) => path.join(sim.dir, d, "tmp"));
    assert.equal(sandboxTmp.length, 1, `the lease's sandbox in the sim: ${sim.sandboxDirs()}`);
    assert.deepEqual(readdirSync(sandboxTmp[0]).filter((n) => n.startsWith("paperclip-createos-transfer-")), []);
    const syncTook = Date.now() - syncStarted;
    const syncRoutes = await routesSince(syncMark);
    assert.ok(syncTook < 30_000, `the sync step took ${syncTook}ms`);
    // In: the upload and the extract, which removes the archive itself
    // (a separate rm follows only an extract that did not finish); out: the
    // archive, the download and the scratch rm, a mapping; one for the
    // post-upload command (its cwd's guard and the command in one script)
    // and one for the execute; the commands are streaming execs, the rm a
    // plain exec, and none is a managed process.
    assert.deepEqual(syncRoutes, [
      "files.put", "exec.stream", // sync in
      "exec.stream", // post-upload: the guard and the command
      "exec.stream", // the execute
      "exec.stream", "files.get", "exec", // sync out: result.txt
      "exec.stream", "files.get", "exec", // sync out: out/
    ]);
    // The worker spaces requests to one origin 300 ms apart: the step's 11
    // requests take about 3 s (24 and about 7 s in v0.1).
    t.diagnostic(`sync in, execute, sync out: ${syncRoutes.length} requests (${tally(syncRoutes)}) in ${syncTook}ms`);

    // No ordinary command or sync of this lease used a managed-process route.
    assert.deepEqual((await routesSince(acquireMark)).filter(managedRoute), []);

    // Release a lease the host can resume: v0.2 keeps it warm (no request,
    // no pause call: the provider's idle pause does that later).
    const release = async () => {
      const releaseMark = await mark();
      const released = await call("environmentReleaseLease", {
        ...base(), providerLeaseId: id, leaseMetadata: lease.metadata,
      }, budget());
      assert.equal(released, null);
      assert.deepEqual(await routesSince(releaseMark), [], "a warm release sends no request");
      assert.equal(await sim.state(id), "running", "the released lease's sandbox is kept warm");
    };
    await release();

    // The next run resumes it. The marker inside the sandbox decides: a
    // lease with another marker is expired (and nothing is deleted), the
    // right one resumes.
    const resumeBudget = Math.min(budget(), 60_000);
    const resume = async (leaseMetadata, wantRoutes, what) => {
      const resumeMark = await mark();
      const result = await call("environmentResumeLease", { ...base(), providerLeaseId: id, leaseMetadata }, resumeBudget);
      assert.deepEqual(await routesSince(resumeMark), wantRoutes, what);
      return result;
    };
    const forged = await resume({ ...lease.metadata, marker: "00000000-0000-4000-8000-000000000000" }, ["sandbox.get", "exec"],
      "resume reads the row and the marker; a wrong marker is expired without another request");
    assert.equal(forged.providerLeaseId ?? null, null, JSON.stringify(forged));
    assert.equal(forged.metadata?.expired, true);
    assert.equal(await sim.state(id), "running", "resume never deletes");
    const resumed = await resume(lease.metadata, ["sandbox.get", "exec"], "a warm resume: the row, then the marker");
    assert.equal(resumed.providerLeaseId, id);
    assert.equal(resumed.metadata.resumedLease, true);
    assert.equal(resumed.metadata.marker, md.marker);
    assert.equal(resumed.metadata.reuseScope, md.reuseScope);
    assert.equal(await sim.state(id), "running");
    lease = leaseArg(id, hostMetadata(resumed.metadata, "resumed", { agentId }));

    const catKept = async (what) => {
      const kept = await call("environmentExecute", {
        ...base(), lease, command: "cat", args: ["kept.txt"], cwd: "/paperclip-workspace", timeoutMs: 10_000, bypassSession: false,
      }, budget(10_000), () => {});
      assert.equal(kept.exitCode, 0);
      assert.equal(kept.stdout, "from stdin ✓\n", what);
    };
    await catKept("the workspace survived release and resume");

    // Released again and left idle: the provider pauses it (the sim's idle
    // pause, through its control API); the next resume starts it again.
    await release();
    await sim.autoPause(id);
    assert.equal(await sim.state(id), "paused");
    const woken = await resume(lease.metadata, ["sandbox.get", "sandbox.resume", "exec"],
      "a resume after the idle pause: the row, the resume, then the marker");
    assert.equal(woken.providerLeaseId, id);
    assert.equal(woken.metadata.resumedLease, true);
    assert.equal(await sim.state(id), "running");
    lease = leaseArg(id, hostMetadata(woken.metadata, "resumed", { agentId }));
    await catKept("the workspace survived the idle pause and resume");

    const destroyMark = await mark();
    const destroyed = await call("environmentDestroyLease", {
      ...base(), providerLeaseId: id, leaseMetadata: lease.metadata,
    }, budget());
    assert.equal(destroyed, null);
    assert.deepEqual(await routesSince(destroyMark), ["sandbox.delete"]);
    assert.equal(await sim.state(id), "gone");
    assert.equal(await sim.status(id), "gone", "the API answers 404 for it");
    const leaseRoutes = await routesSince(acquireMark);
    t.diagnostic(`the whole lease: ${leaseRoutes.length} requests (${tally(leaseRoutes)}) in ${Date.now() - leaseStarted}ms`);
  });

  test("release: a lease the host cannot resume (a run without an execution workspace) is deleted, not kept warm", async () => {
    // A heartbeat whose run has an agent and an issue but no execution
    // workspace: environment-runtime.js sends no executionWorkspaceId, and it
    // looks for a lease to resume only with an execution workspace and an
    // agent, so it would never come back for a warm sandbox.
    const agentId = randomUUID();
    const issueId = randomUUID();
    const acquireMark = await mark();
    const acquired = await call("environmentAcquireLease", {
      ...base(), issueId, runId: randomUUID(), agentId, adapterType: "claude_local",
    }, budget());
    const id = acquired.providerLeaseId;
    assert.ok(typeof id === "string" && id.length > 0, JSON.stringify(acquired));
    sandboxIds.add(id);
    assert.equal(acquired.metadata.reuseScope, null, JSON.stringify(acquired.metadata));
    assert.equal(await sim.state(id), "running");
    // Nothing to reap without a reuse scope: the create and the workspace exec.
    assert.deepEqual(await routesSince(acquireMark), ["sandbox.create", "exec"]);

    const releaseMark = await mark();
    const released = await call("environmentReleaseLease", {
      ...base(), issueId, providerLeaseId: id, // the host sends the lease's issue
      leaseMetadata: hostMetadata(acquired.metadata, "created", { agentId, executionWorkspaceMode: null }),
    }, budget());
    assert.equal(released, null);
    assert.deepEqual(await routesSince(releaseMark), ["sandbox.delete"], "the release deletes the sandbox, with no pause call");
    assert.equal(await sim.state(id), "gone");
  });

  test("provider failures reach the host as errors without the key, the URL or the provider's body", async () => {
    // No key for a custom endpoint: refused before any request (the host's
    // CREATEOS_API_KEY fallback is for the official endpoint only).
    const { apiKey: _omitted, ...keyless } = workerConfig;
    const before = (await sim.requests()).length;
    await rejectsWith(call("environmentAcquireLease", { ...base(), config: keyless, runId: randomUUID() }, budget()),
      /^Custom CreateOS API endpoints require an explicit environment API key/);
    assert.equal((await sim.requests()).length, before, "no request reached the sim without a key");
    // A wrong key: the probe reports the failure.
    const wrong = { ...workerConfig, apiKey: wrongKey };
    const probe = await call("environmentProbe", { driverKey: DRIVER, companyId, environmentId, config: wrong }, 120_000);
    assert.equal(probe.ok, false, JSON.stringify(probe));
    assert.match(probe.summary, /HTTP 401/);
    // A failing create whose body echoes the key and the URL: acquire fails
    // with the driver's own message.
    await sim.fault({
      route: "sandbox.create", status: 403, count: 5,
      body: JSON.stringify({ status: "fail", data: { message: `key ${key} rejected by ${sim.url} (${hostport()})` } }),
    });
    const createMark = await mark();
    try {
      await rejectsWith(call("environmentAcquireLease", { ...base(), runId: randomUUID() }, budget()), /HTTP 403/);
    } finally {
      await sim.resetFaults();
    }
    assert.deepEqual(await routesSince(createMark), ["sandbox.create"], "a refused create is not retried");
    // A command on a lease that no longer exists (the first lease, destroyed
    // above): the streaming exec answers 404, and the sandbox's row, read to
    // tell a gone sandbox from an origin without streaming exec, is 404 too,
    // so the command fails instead of falling back to a managed process.
    const gone = [...sandboxIds][0];
    assert.equal(await sim.state(gone), "gone");
    const md = results.find((r) => r.method === "environmentAcquireLease").result.metadata;
    const goneMark = await mark();
    await rejectsWith(call("environmentExecute", {
      ...base(), lease: leaseArg(gone, hostMetadata(md, "created")), command: "true", args: [], timeoutMs: 5000, bypassSession: false,
    }, budget(5000), () => {}), /HTTP 404/);
    assert.deepEqual(await routesSince(goneMark), ["exec.stream", "sandbox.get"]);
    assert.equal(workerErrors.length, 3, JSON.stringify(workerErrors));
  });

  test("stop(): the worker shuts down, and the sim is left with no sandbox, process or data", async () => {
    const shimPid = handle.diagnostics().pid;
    await handle.stop();
    assert.equal(handle.status, "stopped");
    assert.equal(isAlive(shimPid), false);
    if (goPid) assert.equal(isAlive(goPid), false);

    // Every sandbox the sim saw (the probes', the lease's) is deleted, every
    // request carried the configured key (or, for the wrong-key probe, that
    // one), no command process survives and no sandbox directory remains.
    const requests = await sim.requests();
    for (const r of requests) {
      const m = /^\/v1\/sandboxes\/([A-Za-z0-9_-]+)/.exec(r.path ?? "");
      if (m) sandboxIds.add(m[1]);
      const sent = [r.headers?.["X-Api-Key"]].flat().join(",");
      assert.ok(sent === key || sent === wrongKey, `${r.method} ${r.path} sent X-Api-Key ${JSON.stringify(sent)}`);
    }
    assert.ok(sandboxIds.size >= 2, `sandboxes seen by the sim: ${[...sandboxIds]} (want the probe's and the lease's)`);
    for (const id of sandboxIds) assert.equal(await sim.status(id), "gone", `sandbox ${id}`);
    await waitFor(() => descendants(sim.pid).length === 0, 5000, "no process left under createos-sim");
    assert.deepEqual(sim.sandboxDirs(), []);

    // The sim stops on stdin EOF, cleanly.
    const exit = await sim.stop();
    assert.equal(exit.killed, false, `createos-sim did not exit on stdin EOF; stderr:\n${sim.stderr()}`);
    assert.equal(exit.code, 0, sim.stderr());
    assert.equal(isAlive(sim.pid), false);
  });

  test("neither the API key nor the sim URL is in any worker log, stderr line or error the host received", () => {
    logs.restore();
    const secrets = [key, wrongKey, hostport()];
    // Every record the host logger wrote for this plugin: the worker's `log`
    // notifications ("[plugin] …"), its stderr ("[plugin stderr] …") and the
    // host's own records about the worker.
    const fromWorker = logs.records.filter((r) => r.msg?.startsWith("[plugin"));
    assert.ok(fromWorker.some((r) => r.msg.startsWith("[plugin] ")), "the host received the worker's log notifications");
    for (const r of logs.records) {
      for (const s of secrets) assert.ok(!r.raw.includes(s), `host log record carries ${s}: ${r.raw}`);
    }
    for (const e of workerErrors) {
      const text = JSON.stringify(e);
      for (const s of secrets) assert.ok(!text.includes(s), `${e.method} error carries ${s}: ${text}`);
    }
    // Results: validateConfig's normalizedConfig is the protocol's one echo
    // of the config and must carry both. Nothing else may (resume returns
    // only the driver's own metadata keys, not the host's saved apiUrl).
    for (const { method, result } of results) {
      let checked = result;
      if (method === "environmentValidateConfig" && result?.normalizedConfig) {
        const { apiUrl: _u, apiKey: _k, ...rest } = result.normalizedConfig;
        checked = { ...result, normalizedConfig: rest };
      }
      const text = JSON.stringify(checked) ?? "";
      for (const s of secrets) assert.ok(!text.includes(s), `${method} result carries ${s}: ${text}`);
    }
  });
});
