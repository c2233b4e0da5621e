package setup

// StubAgent stands in for the Claude CLI that the claude_local adapter
// runs in the sandbox: it answers the adapter's --version and --help
// probes, writes a file in its working directory (the sandbox copy of the
// agent's workspace, which the host syncs back), calls GET /api/agents/me
// through the run's API bridge (PAPERCLIP_API_URL and PAPERCLIP_API_KEY, as
// a real agent's tools do) and writes what came back to StubBridgeOutput,
// and prints a minimal stream-json transcript. With StubAPICalls in its
// environment it makes that many calls, one after another, and writes
// what the last came back with, or the first that was not 200 and which
// it was ("… (call 2 of 5)").
const StubAgent = stubProbes + `echo "written by the stub agent" > stub-agent-output.txt || exit 1
node -e '
const fs = require("fs");
const mode = process.env.PAPERCLIP_API_BRIDGE_MODE || "none";
const calls = Math.max(1, parseInt(process.env.` + StubAPICalls + ` || "1", 10) || 1);
const put = (s) => fs.writeFileSync("stub-bridge.txt", mode + " " + s + "\n");
const call = () => fetch(String(process.env.PAPERCLIP_API_URL).replace(/\/+$/, "") + "/api/agents/me", {
  headers: { authorization: "Bearer " + process.env.PAPERCLIP_API_KEY, accept: "application/json" },
}).then(async (res) => {
  const body = await res.text();
  let id = "-";
  try { id = JSON.parse(body).id || "-"; } catch {}
  return { ok: res.status === 200, text: res.status + " " + id };
}, (err) => ({ ok: false, text: "error " + err.message }));
(async () => {
  for (let i = 1; i <= calls; i++) {
    const got = await call();
    if (!got.ok || i === calls) {
      put(got.text + (!got.ok && calls > 1 ? " (call " + i + " of " + calls + ")" : ""));
      return;
    }
  }
})();
' || echo "node failed" > stub-bridge.txt
sid=stub-session-1
printf '%s\n' "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"$sid\",\"model\":\"claude-sonnet\"}"
printf '%s\n' "{\"type\":\"assistant\",\"session_id\":\"$sid\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"wrote stub-agent-output.txt\"}]}}"
printf '%s\n' "{\"type\":\"result\",\"subtype\":\"success\",\"session_id\":\"$sid\",\"result\":\"done\",\"usage\":{\"input_tokens\":1,\"cache_read_input_tokens\":0,\"output_tokens\":1},\"total_cost_usd\":0}"
`

// stubProbes begins both stubs: it answers the adapter's --version and
// --help probes and reads stdin (the prompt) to its end.
const stubProbes = `#!/bin/sh
for a in "$@"; do
	case "$a" in
	--version) echo "2.1.251 (Claude Code)"; exit 0 ;;
	--help) echo "Usage: claude [options]"; exit 0 ;;
	esac
done
cat >/dev/null
`

// StubAPICalls is the environment variable that sets how many API calls
// the stub agent makes (1 without it).
const StubAPICalls = "STUB_API_CALLS"

// StubBridgeOutput is the file the stub writes "<bridge mode> <HTTP
// status> <agent id>" to after its API call through the bridge.
const StubBridgeOutput = "stub-bridge.txt"

// StubFailingAgent is the stub agent of a run that must fail: it answers
// the same probes, then says so on stderr and exits 3 before any
// transcript, so the host marks the run failed and its lease failed
// (heartbeat.js leaseReleaseStatusForRunStatus). StubFailure is the line
// the stored run log must hold, so the failure is known to be the agent's.
const StubFailingAgent = stubProbes + `echo "` + StubFailure + `" >&2
exit 3
`

const StubFailure = "stub agent: failing this run on purpose"

// FailingStub is the stub agent that fails its run, beside the stub.
const FailingStub = "claude-fail"
