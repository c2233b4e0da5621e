// The packaged worker driven by the host's own worker manager
// (createPluginWorkerHandle), with environment-call params shaped as
// environment-runtime.js and plugin-environment-driver.js shape them.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  childPids, environmentDriver, isAlive, processEnv, sdk, startHandle, waitFor,
} from "./host.mjs";

const { JsonRpcCallError, PLUGIN_RPC_ERROR_CODES, JSONRPC_ERROR_CODES } = sdk;
const DRIVER = "fake-plugin";
const companyId = `company-${randomUUID()}`;
const environmentId = `env-${randomUUID()}`;
const config = { image: "fake:conformance", timeoutMs: 20000, reuseLease: false };

// The host's RPC budget for a call: (timeoutMs or config.timeoutMs) + 30 s.
const budget = (requestedTimeoutMs) =>
  environmentDriver.resolvePluginExecuteRpcTimeoutMs({ requestedTimeoutMs, config });

const base = () => ({ driverKey: DRIVER, companyId, environmentId, issueId: null, config });

function hostLease(pluginId, lease) {
  // environment-runtime.js persists the worker's metadata merged with host keys
  // and hands it back on realize/execute/sync.
  return {
    providerLeaseId: lease.providerLeaseId,
    metadata: {
      driver: "sandbox", executionWorkspaceMode: "isolated_workspace", pluginId, pluginKey: "paperclip.go-sandbox-provider",
      sandboxProviderPlugin: true, provider: DRIVER, image: config.image, ...lease.metadata,
      sandboxLeaseAcquisition: { outcome: "created" },
    },
    expiresAt: lease.expiresAt ?? null,
  };
}

async function rejectsWithCode(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof JsonRpcCallError, `${err?.name}: ${err?.message}`);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

describe("worker under createPluginWorkerHandle", () => {
  const pluginId = `plugin-${randomUUID()}`;
  let handle;
  let goPid;

  before(async () => {
    handle = await startHandle(pluginId);
    [goPid] = childPids(handle.diagnostics().pid);
  });
  after(async () => {
    if (handle.status === "running") await handle.stop();
  });

  test("initialize: running, with the environment methods in supportedMethods", () => {
    assert.equal(handle.status, "running");
    for (const m of ["health", "shutdown", "environmentValidateConfig", "environmentProbe", "environmentAcquireLease",
      "environmentReleaseLease", "environmentDestroyLease", "environmentRealizeWorkspace", "environmentExecute"]) {
      assert.ok(handle.supportedMethods.includes(m), `supportedMethods lacks ${m}: ${handle.supportedMethods}`);
    }
    for (const m of handle.supportedMethods) {
      assert.ok(sdk.HOST_TO_WORKER_REQUIRED_METHODS.includes(m) || sdk.HOST_TO_WORKER_OPTIONAL_METHODS.includes(m), `${m} is not a host method`);
    }
  });

  test("every declared sandbox capability is verified by supportedMethods", async () => {
    // environment-runtime.js (SANDBOX_CAPABILITY_PREREQUISITE_METHODS, not
    // exported): each group needs one verified verb; a declared capability
    // whose verbs are missing is silently denied by the host.
    const prerequisites = {
      reusableLeases: environmentDriver.REUSABLE_LEASE_WORKER_METHODS.map((m) => [m]),
      nativeSyncIn: [["environmentSyncIn"]],
      nativeSyncOut: [["environmentSyncOut"]],
      persistentProcessSessions: [["environmentExecute"]],
      independentControlCommands: [["environmentExecute"]],
      incrementalSessionOutput: [["environmentExecute"]],
      concurrentSyncOperations: [["environmentSyncIn"], ["environmentSyncOut"]],
      duplexCommandStream: [["duplexChannelOpen"]],
      runnerWebSocketIngress: [["environmentRunnerIngressEndpoint"]],
    };
    const { importManifest } = await import("./host.mjs");
    const manifest = await importManifest();
    const verified = new Set(handle.supportedMethods);
    for (const driver of manifest.environmentDrivers) {
      for (const [key, on] of Object.entries(driver.sandboxCapabilities ?? {})) {
        if (on !== true) continue;
        assert.ok(prerequisites[key], `${driver.driverKey}: unknown sandbox capability ${key}`);
        for (const group of prerequisites[key]) {
          assert.ok(group.some((m) => verified.has(m)), `${driver.driverKey} declares ${key} but supportedMethods lacks ${group}`);
        }
      }
      if (driver.supportsReusableLeases) {
        for (const m of environmentDriver.REUSABLE_LEASE_WORKER_METHODS) assert.ok(verified.has(m), `${driver.driverKey}: reuse needs ${m}`);
      }
      if (driver.supportsInteractiveSetup) {
        for (const m of environmentDriver.INTERACTIVE_SETUP_WORKER_METHODS) assert.ok(verified.has(m), `${driver.driverKey}: setup needs ${m}`);
      }
      if (driver.supportsTemplateCapture) {
        for (const m of environmentDriver.TEMPLATE_CAPTURE_WORKER_METHODS) assert.ok(verified.has(m), `${driver.driverKey}: capture needs ${m}`);
      }
      if (driver.supportsTemplateDelete) {
        for (const m of environmentDriver.TEMPLATE_DELETE_WORKER_METHODS) assert.ok(verified.has(m), `${driver.driverKey}: delete needs ${m}`);
      }
    }
    // Native sync is all or nothing for the host.
    assert.equal(verified.has("environmentSyncIn"), verified.has("environmentSyncOut"));
  });

  test("the worker process runs with the scrubbed environment (no HOME)", { skip: process.platform !== "linux" && "needs /proc" }, () => {
    assert.ok(goPid, "the shim has a Go child");
    const env = processEnv(goPid);
    assert.ok(env, "readable /proc environ");
    assert.equal(env.HOME, undefined);
    assert.equal(env.USER, undefined);
    assert.equal(env.PAPERCLIP_PLUGIN_ID, pluginId);
    assert.equal(env.NODE_ENV, "production");
    for (const key of Object.keys(env)) {
      assert.ok(["PATH", "NODE_PATH", "PAPERCLIP_PLUGIN_ID", "NODE_ENV", "TZ", "PAPERCLIP_DEPLOYMENT_MODE", "PAPERCLIP_DEPLOYMENT_EXPOSURE",
        "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY",
        "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS"].includes(key), `unexpected env ${key}`);
    }
  });

  test("health", async () => {
    const health = await handle.call("health", {});
    assert.equal(health.status, "ok");
  });

  test("full fake lease lifecycle with streamed execute.log", async () => {
    const validated = await handle.call("environmentValidateConfig", { driverKey: DRIVER, config });
    assert.equal(validated.ok, true);
    assert.equal(validated.normalizedConfig.image, config.image);

    const probe = await handle.call("environmentProbe", { driverKey: DRIVER, companyId, environmentId, config }, 120_000);
    assert.equal(probe.ok, true);
    assert.equal(probe.metadata.provider, DRIVER);

    const acquired = await handle.call("environmentAcquireLease", {
      ...base(), runId: randomUUID(), workspaceMode: "isolated_workspace", agentId: undefined, executionWorkspaceId: undefined, adapterType: "claude_local",
    }, budget());
    assert.match(acquired.providerLeaseId, /^fake-plugin:\/\//);
    const lease = hostLease(pluginId, acquired);

    const realized = await handle.call("environmentRealizeWorkspace", {
      ...base(), lease, workspace: { remotePath: undefined, mode: "isolated_workspace" },
    }, budget());
    assert.match(realized.cwd, /paperclip-fake-sandbox-/);

    const chunks = [];
    const script = "for i in 1 2 3; do echo out-$i; echo err-$i >&2; done; printf 'héllo\\n'";
    const executed = await handle.call("environmentExecute", {
      ...base(), lease, command: "sh", args: ["-c", script], cwd: realized.cwd, env: { CONFORMANCE: "1" },
      stdin: undefined, timeoutMs: 10_000, bypassSession: false,
    }, budget(10_000), (stream, chunk) => { chunks.push({ stream, chunk }); });
    assert.equal(executed.exitCode, 0);
    assert.equal(executed.timedOut, false);
    assert.equal(executed.stdout, "out-1\nout-2\nout-3\nhéllo\n");
    assert.equal(executed.stderr, "err-1\nerr-2\nerr-3\n");
    const streamed = (s) => chunks.filter((c) => c.stream === s).map((c) => c.chunk).join("");
    assert.equal(streamed("stdout"), executed.stdout, "execute.log stdout reached the sink in full");
    assert.equal(streamed("stderr"), executed.stderr, "execute.log stderr reached the sink in full");

    if (handle.supportedMethods.includes("environmentSyncIn") && handle.supportedMethods.includes("environmentSyncOut")) {
      const hostDir = mkdtempSync(path.join(tmpdir(), "conformance-sync-"));
      try {
        mkdirSync(path.join(hostDir, "in", "sub"), { recursive: true });
        writeFileSync(path.join(hostDir, "in", "a.txt"), "alpha\n");
        writeFileSync(path.join(hostDir, "in", "sub", "b.txt"), "beta\n");
        const target = path.posix.join(realized.cwd, "synced");
        const syncIn = await handle.call("environmentSyncIn", {
          ...base(), lease,
          operations: [{ operationId: "op-in", files: [{ sourcePath: path.join(hostDir, "in"), targetPath: target, kind: "directory" }] }],
        }, budget());
        assert.equal(syncIn.operations[0].operationId, "op-in");
        assert.equal(syncIn.operations[0].filesTransferred, 2);
        const cat = await handle.call("environmentExecute", {
          ...base(), lease, command: "cat", args: ["synced/a.txt", "synced/sub/b.txt"], cwd: realized.cwd, timeoutMs: 5000,
        }, budget(5000));
        assert.equal(cat.stdout, "alpha\nbeta\n");
        const syncOut = await handle.call("environmentSyncOut", {
          ...base(), lease,
          operations: [{ operationId: "op-out", files: [{ sourcePath: path.posix.join(target, "sub", "b.txt"), targetPath: path.join(hostDir, "out", "b.txt"), kind: "file" }] }],
        }, budget());
        assert.equal(syncOut.operations[0].filesTransferred, 1);
        assert.equal(readFileSync(path.join(hostDir, "out", "b.txt"), "utf8"), "beta\n");
      } finally {
        rmSync(hostDir, { recursive: true, force: true });
      }
    }

    // null, or (N+) a termination receipt for this lease.
    const released = await handle.call("environmentReleaseLease", {
      ...base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata,
    }, budget());
    if (released !== null) {
      assert.equal(released.providerLeaseId, lease.providerLeaseId);
      assert.ok(["stopped", "destroyed"].includes(released.state), released.state);
    }
    // Destroy after release: idempotent, tolerates "already gone".
    await handle.call("environmentDestroyLease", { ...base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  });

  test("the real server's call shapes (seen by make server-e2e)", async () => {
    const acquired = await handle.call("environmentAcquireLease", {
      ...base(), runId: randomUUID(), adapterType: "claude_local", agentId: randomUUID(),
    }, budget());
    const lease = hostLease(pluginId, acquired);
    // Realize, execute, sync and release get the config merged with the
    // lease's metadata; executes carry bypassSession and the run timeout,
    // and the managed-runtime probes run in "/".
    const merged = { ...config, ...acquired.metadata, agentId: randomUUID() };
    const probe = await handle.call("environmentExecute", {
      ...base(), config: merged, lease, command: "sh", args: ["-c", "pwd; command -v sh >/dev/null"], cwd: "/",
      timeoutMs: 14_400_000, bypassSession: true,
    }, budget(14_400_000));
    assert.equal(probe.exitCode, 0, probe.stderr);
    assert.equal(probe.stdout, "/\n");
    // Orphan cleanup after the environment was deleted: environmentId "".
    const destroyed = await handle.call("environmentDestroyLease", {
      ...base(), environmentId: "", config: merged, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata,
    }, budget());
    assert.equal(destroyed?.state ?? "destroyed", "destroyed");
  });

  test("interactive setup, template capture and delete", async (t) => {
    const needed = ["environmentStartInteractiveSetup", "environmentGetInteractiveSetup", "environmentCaptureTemplate",
      "environmentCancelInteractiveSetup", "environmentDeleteTemplate"];
    if (!needed.every((m) => handle.supportedMethods.includes(m))) return t.skip("not advertised");
    const sessionId = "setup-1";
    const started = await handle.call("environmentStartInteractiveSetup", {
      companyId, environmentId, issueId: null, sessionId, sourceTemplateRef: "source-template-secret", expiresAt: "2030-01-01T00:00:00.000Z",
      driverKey: DRIVER, config,
    }, budget());
    assert.equal(started.status, "waiting_for_user");
    assert.equal(started.connectionSummary.hostRedacted, true);
    assert.ok(!JSON.stringify(started).includes("source-template-secret"));
    const got = await handle.call("environmentGetInteractiveSetup", {
      companyId, environmentId, providerLeaseId: started.providerLeaseId, includeConnectionPayload: false, driverKey: DRIVER, config,
    }, budget());
    assert.equal(got.status, "waiting_for_user");
    const captured = await handle.call("environmentCaptureTemplate", {
      companyId, environmentId, providerLeaseId: started.providerLeaseId, sourceTemplateRef: "source-template-secret",
      previousTemplateRef: null, templateLabel: "conformance", timeoutMs: null, driverKey: DRIVER, config,
    }, budget());
    assert.equal(captured.templateKind, "snapshot");
    assert.match(captured.templateRef, /^fake-template:/);
    const deleted = await handle.call("environmentDeleteTemplate", {
      companyId, environmentId, templateRef: captured.templateRef, templateKind: "snapshot", reason: "rollback", driverKey: DRIVER, config,
    }, budget());
    assert.equal(deleted.deleted, true);
    const cancelled = await handle.call("environmentCancelInteractiveSetup", {
      companyId, environmentId, providerLeaseId: "fake-plugin-setup://nope/none", reason: "timed_out", driverKey: DRIVER, config,
    }, budget());
    assert.equal(cancelled.status, "timed_out");
  });

  test("errors surface as JsonRpcCallError with the worker's codes", async () => {
    await rejectsWithCode(handle.call("environmentProbe", { ...base(), driverKey: "no-such-driver" }), JSONRPC_ERROR_CODES.INVALID_PARAMS);
    await rejectsWithCode(handle.call("noSuchMethod", {}), JSONRPC_ERROR_CODES.METHOD_NOT_FOUND);
    await rejectsWithCode(handle.call("environmentRunnerIngressEndpoint", {}), PLUGIN_RPC_ERROR_CODES.METHOD_NOT_IMPLEMENTED);
  });

  test("a call past its host timeout fails with TIMEOUT and the worker keeps serving", async () => {
    const acquired = await handle.call("environmentAcquireLease", { ...base(), runId: randomUUID() }, budget());
    const lease = hostLease(pluginId, acquired);
    await rejectsWithCode(handle.call("environmentExecute", {
      ...base(), lease, command: "sleep", args: ["3"], timeoutMs: 5000,
    }, 200), PLUGIN_RPC_ERROR_CODES.TIMEOUT);
    assert.equal((await handle.call("health", {})).status, "ok");
    await handle.call("environmentDestroyLease", { ...base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  });

  test("stop() shuts the worker down through the shutdown request", async () => {
    const shimPid = handle.diagnostics().pid;
    const t0 = Date.now();
    await handle.stop();
    const took = Date.now() - t0;
    assert.equal(handle.status, "stopped");
    // The drain path (shutdown reply + exit) is well under the 10 s drain and
    // needs no SIGTERM escalation.
    assert.ok(took < 3000, `stop took ${took}ms`);
    assert.equal(isAlive(shimPid), false);
    if (goPid) assert.equal(isAlive(goPid), false);
  });
});

describe("killed worker", () => {
  test("pending calls fail, the handle reports a crash, and the Go worker exits too", async () => {
    const handle = await startHandle(`plugin-${randomUUID()}`);
    const shimPid = handle.diagnostics().pid;
    const [goPid] = childPids(shimPid);
    const crashed = new Promise((resolve) => handle.on("crash", resolve));
    const acquired = await handle.call("environmentAcquireLease", { ...base(), runId: randomUUID() });
    const lease = hostLease("p", acquired);
    const pending = handle.call("environmentExecute", { ...base(), lease, command: "sleep", args: ["30"], timeoutMs: 60000 }, 90_000);
    await new Promise((r) => setTimeout(r, 100));
    process.kill(shimPid, "SIGKILL"); // the host's last resort; the shim cannot forward it
    await assert.rejects(pending, /Worker process exited \(code=null, signal=SIGKILL\)/);
    const crash = await crashed;
    assert.equal(crash.signal, "SIGKILL");
    assert.equal(crash.willRestart, false);
    assert.equal(handle.status, "crashed");
    await assert.rejects(handle.call("health", {}), /is crashed/);
    if (goPid) await waitFor(() => !isAlive(goPid), 5000, "the orphaned Go worker to exit");
    await handle.stop();
  });
});
