package scale

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The scripts a host-load run executes, in the shapes
// @paperclipai/adapter-utils@2026.916.1 gives them
// (sandbox-callback-bridge.js and sandbox-run-log-stream.js): each is the
// argument of `sh -c`. Nothing in the bench writes a request file, as no
// agent runs: a relay's four executes act on a request that is absent,
// which the host's own commands take in their stride (the size read fails
// and the host falls back to its cap, the response write answers
// {"wrote":false}). They cost the provider what they cost with a request.
// The next host's waiting listing is the exception: it would wait its full
// 5 s for a request nobody writes, so there the bench writes one when the
// agent's call is due (nextListScript) and the relay acts on it.

// queueDir is run n's bridge directory in its sandbox: the queue and the
// run logs.
func queueDir(n int) string { return fmt.Sprintf("/tmp/paperclip-bench-hostload/run-%d", n) }

// quote is s as one shell word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runLogs are the run log's two files, as the host names a run's first.
func runLogs(dir string) (stdout, stderr string) {
	return dir + "/logs/run-1-stdout.log", dir + "/logs/run-1-stderr.log"
}

// setupScript makes the queue's directories and empty run logs: the host's
// bridge start, in one execute.
func setupScript(dir string) string {
	out, errs := runLogs(dir)
	return fmt.Sprintf("mkdir -p %s %s %s && : > %s && : > %s",
		quote(dir+"/requests"), quote(dir+"/responses"), quote(dir+"/logs"), quote(out), quote(errs))
}

// listScript is the queue poll: the request files' names (listJsonFiles).
func listScript(dir string) string {
	q := quote(dir + "/requests")
	return strings.Join([]string{
		"if [ -d " + q + " ]; then",
		"  for file in " + q + "/*.json; do",
		`    [ -f "$file" ] || continue`,
		`    basename "$file"`,
		"  done",
		"fi",
	}, "\n")
}

// listMarker names listing seq of run n in its script, as a comment: the
// provider's request log finds the request that carried the listing by it.
func listMarker(n, seq int) string { return fmt.Sprintf("bench-list-%d-%d", n, seq) }

// nextListScript is the next host's waiting listing (listJsonFiles with
// waitMs in sandbox-callback-bridge.ts, commit 01b6c57): it lists the
// queue every poll interval until a request is there or the whole-second
// deadline wait from its start has passed. The bench adds two lines: the
// comment marker, and, in the loop, the agent's API call: request id is
// written once the clock passes due (Unix ms), as the agent in the sandbox
// would write it, so the wait returns for it as for a real one.
func nextListScript(dir, marker, id string, due time.Time, wait time.Duration) string {
	req := quote(dir + "/requests/" + id + ".json")
	return strings.Join([]string{
		"# " + marker,
		fmt.Sprintf("paperclip_end=$(( $(date +%%s) + %d ))", int(math.Ceil(wait.Seconds()))),
		"while :; do",
		fmt.Sprintf(`  [ "$(date +%%s%%3N)" -lt %d ] || : > %s`, due.UnixMilli(), req),
		"  paperclip_listed=$(" + listScript(dir),
		"  )",
		`  if [ -n "$paperclip_listed" ]; then`,
		`    printf '%s\n' "$paperclip_listed"`,
		"    break",
		"  fi",
		`  [ "$(date +%s)" -lt "$paperclip_end" ] || break`,
		fmt.Sprintf("  sleep %.3f 2>/dev/null || sleep 1", pollInterval.Seconds()),
		"done",
	}, "\n")
}

// firstListed is the first request file a listing printed, or false.
func firstListed(stdout string) (string, bool) {
	for l := range strings.Lines(stdout) {
		if name := strings.TrimSpace(l); strings.HasSuffix(name, ".json") {
			return name, true
		}
	}
	return "", false
}

// The run-log tick's markers and how much of each log one tick reads.
const (
	tailMarkerStdout = "__PAPERCLIP_RUN_LOG_STDOUT__"
	tailMarkerStderr = "__PAPERCLIP_RUN_LOG_STDERR__"
	tailMarkerEnd    = "__PAPERCLIP_RUN_LOG_END__"
	tailChunk        = 65536
)

// tailScript is one run-log tick: both logs from the start (a quiet agent
// never moves the host's offsets), each between markers.
func tailScript(dir string) string {
	out, errs := runLogs(dir)
	read := func(f string) string {
		return fmt.Sprintf("if [ -f %s ]; then tail -c +1 %s | head -c %d | base64; fi", quote(f), quote(f), tailChunk)
	}
	return strings.Join([]string{
		"printf '%s\\n' " + quote(tailMarkerStdout), read(out),
		"printf '%s\\n' " + quote(tailMarkerStderr), read(errs),
		"printf '%s\\n' " + quote(tailMarkerEnd),
	}, "\n")
}

// relayStep is one of a relay's four executes: its script, the body it
// sends on stdin ("" for none), and whether the host needs exit code 0.
type relayStep struct {
	name, script, stdin string
	mustSucceed         bool
}

// relayBody is a small JSON answer to the agent's API call.
const relayBody = `{"id":"%s","status":200,"headers":{"content-type":"application/json"},"body":"{\"ok\":true}","completedAt":"2026-12-02T17:50:00.000Z"}`

// relaySteps are the four executes that relay request id: its size, its
// body, the response's write (a mkdir lock, cat >, mv) and its removal.
func relaySteps(dir, id string) []relayStep {
	req, resp := quote(dir+"/requests/"+id+".json"), dir+"/responses/"+id+".json"
	write := strings.Join([]string{
		"set -eu",
		"response_dir=" + quote(dir+"/responses"), "response_path=" + quote(resp),
		"temp_path=" + quote(resp+".tmp"), "lock_dir=" + quote(resp+".paperclip-write.lock"), "request_path=" + req,
		`mkdir -p "$response_dir"`,
		`while ! mkdir "$lock_dir" 2>/dev/null; do sleep 0.05; done`,
		`trap 'rm -f "$temp_path"; rm -rf "$lock_dir"' EXIT`,
		`if [ -n "$request_path" ] && [ ! -f "$request_path" ]; then printf '{"wrote":false}\n'; exit 0; fi`,
		`if [ -f "$response_path" ]; then printf '{"wrote":false}\n'; exit 0; fi`,
		`cat > "$temp_path"`, `mv "$temp_path" "$response_path"`, `printf '{"wrote":true}\n'`,
	}, "\n")
	return []relayStep{
		{name: "size", script: "wc -c < " + req},
		{name: "read", script: "head -c 262145 " + req + " | base64", mustSucceed: true},
		{name: "write", script: write, stdin: fmt.Sprintf(relayBody, id), mustSucceed: true},
		{name: "remove", script: "rm -rf " + req, mustSucceed: true},
	}
}
