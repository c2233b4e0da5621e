package createos

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/uri"
)

func scriptOf(t *testing.T, body map[string]any) string {
	t.Helper()
	args, _ := body["args"].([]any)
	if len(args) != 2 || args[0] != "-lc" {
		t.Fatalf("args %v", body["args"])
	}
	return args[1].(string)
}

// 12. "quotes hostile args/env/cwd and stages stdin instead of racing the
// input endpoint", v0.3: the script waits at a start gate, and the calls
// are exactly: the launch data (stdin with it) staged, creation, connect,
// stdin/close, the gate (after the connect answered), and the rm of both
// files.
func TestCommandQuotesHostileArgsEnvCwdAndStagesStdin(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.reset()
	d.commands.NewID = sequentialUUIDs()
	p := execParams(l, nil)
	p.Command = "printf"
	p.Args = []string{"a'; touch /bad; echo '"}
	p.Env = map[string]string{"MESSAGE": "$(touch /bad)", "A_FIRST": "x"}
	p.Cwd = "/work dir"
	p.Stdin = ptr("secret input\n")
	if _, err := d.executeManaged(t.Context(), p, nil); err != nil {
		t.Fatal(err)
	}
	const stdinPath, gatePath = "/tmp/paperclip-stdin-00000000-0000-4000-8000-000000000001", "/tmp/paperclip-start-00000000-0000-4000-8000-000000000002"
	calls := s.snapshot()
	want := []string{
		"PUT /v1/sandboxes/sb_test/files?path=" + uri.Component(stdinPath),
		"POST /v1/sandboxes/sb_test/processes",
		"GET /v1/sandboxes/sb_test/processes/proc_test/connect?after=0",
		"POST /v1/sandboxes/sb_test/processes/proc_test/stdin/close",
		"PUT /v1/sandboxes/sb_test/files?path=" + uri.Component(gatePath),
		"POST /v1/sandboxes/sb_test/exec",
	}
	if got := callStrings(calls); !slices.Equal(got, want) {
		t.Fatalf("calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	want0, _ := launch.Data(launch.Command{Argv: []string{"printf", "a'; touch /bad; echo '"}, Cwd: "/work dir",
		Env: map[string]string{"MESSAGE": "$(touch /bad)", "A_FIRST": "x"}, Stdin: ptr("secret input\n")})
	if string(calls[0].Body) != want0 || len(calls[4].Body) != 0 {
		t.Errorf("staged %q, gate %q", calls[0].Body, calls[4].Body)
	}
	body := calls[1].json(t)
	if body["cmd"] != "/bin/bash" || body["cwd"] != "/work dir" {
		t.Errorf("body %v", body)
	}
	if _, ok := body["env"]; ok {
		t.Error("env sent to the API")
	}
	if _, ok := body["timeout_ms"]; ok {
		t.Error("timeout_ms sent to the API")
	}
	sc := scriptOf(t, body)
	wantScript := "until [ -e '" + gatePath + "' ]; do sleep 0.01; done\nrm -f -- '" + gatePath + "'\n" +
		"exec < '" + stdinPath + "' || exit\n" + launch.Script
	if sc != wantScript {
		t.Errorf("script\n%s\nwant\n%s", sc, wantScript)
	}
	rm := calls[5].json(t)
	if args, _ := rm["args"].([]any); rm["cmd"] != "/bin/rm" || !slices.Equal(args, []any{"-f", "--", gatePath, stdinPath}) {
		t.Errorf("rm %v", rm)
	}
}

// sequentialUUIDs returns a newUUID whose answers are numbered from 1.
func sequentialUUIDs() func() string {
	var n atomic.Int64
	return func() string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n.Add(1)) }
}

// callStrings is each call as "METHOD path?query".
func callStrings(calls []scriptedCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.String()
	}
	return out
}

// 13. "replays the same process after disconnect without duplicate logs,
// preserving split UTF-8"
func TestCommandReplaysSameProcessAfterDisconnect(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	euro := []byte("€")
	var afters []string
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
		afters = append(afters, r.URL.Query().Get("after"))
		if n == 1 {
			ndjson(w, dataFrameBytes(1, "stdout", euro[:2]))
			return
		}
		ndjson(w, dataFrameBytes(1, "stdout", euro[:2]), dataFrameBytes(2, "stdout", euro[2:]),
			`{"type":"heartbeat"}`, "", dataFrame(3, "stderr", "warning"), `{"type":"exit","exit_code":7}`)
	}
	sink := &recordingSink{}
	res, err := d.executeManaged(t.Context(), execParams(l, nil), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 7 || res.Signal != nil || res.Stdout != "€" || res.Stderr != "warning" || res.TimedOut {
		t.Errorf("result %+v", res)
	}
	if len(afters) != 2 || afters[0] != "0" || afters[1] != "1" {
		t.Errorf("connect offsets %v", afters)
	}
	want := [][2]string{{"stdout", "€"}, {"stderr", "warning"}}
	if len(sink.chunks) != 2 || sink.chunks[0] != want[0] || sink.chunks[1] != want[1] {
		t.Errorf("log %q, want %q", sink.chunks, want)
	}
	if n := s.count("POST /v1/sandboxes/sb_test/processes"); n != 2 { // creation + stdin/close
		t.Errorf("%d process posts", n)
	}
	if s.count("DELETE /v1/sandboxes/sb_test/processes") != 0 {
		t.Error("a completed process was deleted")
	}
}

// 14. "terminates the process tree on %s output"
func TestCommandTerminatesProcessTreeOnBadOutput(t *testing.T) {
	cases := map[string]struct {
		connect func(w http.ResponseWriter, r *http.Request, n int)
		want    string
	}{
		"gap":     {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, dataFrame(2, "stdout", "x")) }, "sequence gap"},
		"expired": {func(w http.ResponseWriter, r *http.Request, n int) { failWith(w, http.StatusGone) }, "evicted"},
		"stream error": {func(w http.ResponseWriter, r *http.Request, n int) {
			ndjson(w, `{"type":"error","error":"output_offset_expired"}`)
		}, "evicted"},
		"malformed":    {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{broken`) }, "invalid process frame"},
		"missing exit": {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"exit"}`) }, "exit status is missing"},
		"other error":  {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"error","error":"boom"}`) }, "stream reported an error"},
		"unknown":      {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"mystery"}`) }, "unknown process event"},
		"array frame":  {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `[1]`) }, "invalid process frame"},
		"bad seq":      {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"data","seq":0}`) }, "sequence is invalid"},
		"bad base64": {func(w http.ResponseWriter, r *http.Request, n int) {
			ndjson(w, `{"type":"data","seq":1,"stream":"stdout","data_base64":"YQ"}`)
		}, "output is invalid"},
		"pty in v0.1": {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, dataFrame(1, "pty", "x")) }, "output is invalid"},
		"bad signal":  {func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"exit","signal":"TERM"}`) }, "exit status is missing"},
		"5xx forever": {func(w http.ResponseWriter, r *http.Request, n int) { failWith(w, http.StatusBadGateway) }, "output connection failed"},
		"4xx":         {func(w http.ResponseWriter, r *http.Request, n int) { failWith(w, http.StatusForbidden) }, "HTTP 403) during output connection"},
		"too large": {func(w http.ResponseWriter, r *http.Request, n int) {
			ndjson(w, `{"type":"heartbeat","pad":"`+strings.Repeat("x", 1<<20)+`"}`)
		}, "frame is too large"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			l := acquire(t, d, nil)
			s.connect = tc.connect
			_, err := d.executeManaged(t.Context(), execParams(l, nil), nil)
			wantErr(t, err, tc.want)
			if s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test?grace_ms=1000") < 0 {
				t.Errorf("no tree DELETE: %v", s.snapshot())
			}
			if name == "5xx forever" {
				if n := s.count("GET /v1/sandboxes/sb_test/processes/proc_test/connect"); n != 1+3 { // the first connect and the client's 3 reconnects
					t.Errorf("%d connects", n)
				}
			}
		})
	}
}

// A signal exit is reported as such.
func TestCommandSignalExit(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"exit","signal":"SIGKILL"}`) }
	res, err := d.executeManaged(t.Context(), execParams(l, nil), nil)
	if err != nil || res.ExitCode != nil || res.Signal == nil || *res.Signal != "SIGKILL" {
		t.Fatalf("%+v %v", res, err)
	}
}

// 15. "enforces timeout and preserves partial output while cleanup uses a
// fresh deadline"
func TestCommandTimeoutPreservesPartialOutputAndCleansUpWithFreshDeadline(t *testing.T) {
	// In a synctest bubble the 50 ms pass only once the driver waits on the
	// stream after the partial output, never during creation or before the
	// output was read.
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(t)
		d := s.driver()
		l := acquire(t, d, nil)
		s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
			ndjson(w, dataFrame(1, "stdout", "partial"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
		p := execParams(l, nil)
		p.TimeoutMs = ptr(50.0)
		start := time.Now()
		res, err := d.executeManaged(t.Context(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != nil || !res.TimedOut || res.Stdout != "partial" || res.Metadata["processId"] != "proc_test" {
			t.Errorf("result %+v", res)
		}
		if took := time.Since(start); took != 50*time.Millisecond {
			t.Errorf("took %v, want the 50ms timeout", took)
		}
		// v0.3: some call is the tree DELETE (the gate's rm follows it).
		calls := s.snapshot()
		del := s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test?grace_ms=1000")
		if del < 0 || calls[del].Aborted {
			t.Fatalf("no live tree DELETE: %v", calls)
		}
		if last := calls[len(calls)-1]; del != len(calls)-2 || last.String() != "POST /v1/sandboxes/sb_test/exec" || last.Aborted {
			t.Errorf("after the DELETE: %v", calls[del:])
		}
	})
}

// 16. "reports unconfirmed termination rather than hiding cleanup failure"
func TestCommandReportsUnconfirmedTermination(t *testing.T) {
	for name, del := range map[string]func(w http.ResponseWriter){
		"503":         func(w http.ResponseWriter) { failWith(w, http.StatusServiceUnavailable) },
		"tree stayed": func(w http.ResponseWriter) { success(w, map[string]any{"tree_exited": false}) },
	} {
		t.Run(name, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			l := acquire(t, d, reuse)
			s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"error","error":"boom"}`) }
			s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
				if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/processes/") {
					del(w)
					return true
				}
				return false
			}
			_, err := d.executeManaged(t.Context(), execParams(l, reuse), nil)
			wantErr(t, err, "termination is unconfirmed")
			_, err = d.ReleaseLease(t.Context(), releaseParams(l, reuse))
			wantErr(t, err, "cleanup is unconfirmed; destroy this lease")
		})
	}
	// A 404 means the process is already gone: not a failure.
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"error","error":"boom"}`) }
	s.hook = failing(http.StatusNotFound, processDeletion)
	_, err := d.executeManaged(t.Context(), execParams(l, nil), nil)
	wantErr(t, err, "stream reported an error")
}

// 17. "rejects invalid env names before sending a command"
func TestCommandRejectsInvalidEnvNamesBeforeSending(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.reset()
	for _, name := range []string{"BAD;KEY", "1A", "", "A-B"} {
		p := execParams(l, nil)
		p.Env = map[string]string{name: "v"}
		_, err := d.executeManaged(t.Context(), p, nil)
		wantErr(t, err, "Invalid sandbox environment")
	}
	if n := len(s.snapshot()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

// A truncated stream is reported in the result metadata.
func TestCommandReportsOutputTruncated(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	d.commands.MaxCapture = 16 // the 4 Mi limit itself is tested on output directly
	l := acquire(t, d, nil)
	sink := &recordingSink{}
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
		ndjson(w, dataFrame(1, "stdout", strings.Repeat("z", 10)), dataFrame(2, "stdout", strings.Repeat("y", 10)), `{"type":"exit","exit_code":0}`)
	}
	res, err := d.executeManaged(t.Context(), execParams(l, nil), sink)
	if len(sink.chunks) != 2 || len(sink.chunks[0][1])+len(sink.chunks[1][1]) != 20 {
		t.Errorf("live output is not capped: %q", sink.chunks)
	}
	if err != nil || res.TimedOut || res.Metadata["outputTruncated"] != true || res.Stdout != "zzzzzzyyyyyyyyyy" {
		t.Fatalf("truncated %v, %d bytes, %v", res.Metadata, len(res.Stdout), err)
	}
}

// 429 and 5xx on connect are retried against the same process.
func TestCommandRetriesRateLimitedConnect(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			failWith(w, http.StatusTooManyRequests)
		case 2:
			failWith(w, http.StatusServiceUnavailable)
		default:
			ndjson(w, dataFrame(1, "stdout", "ok"), `{"type":"exit","exit_code":0}`)
		}
	}
	res, err := d.executeManaged(t.Context(), execParams(l, nil), nil)
	if err != nil || res.Stdout != "ok" {
		t.Fatalf("%+v %v", res, err)
	}
	if n := s.count("POST /v1/sandboxes/sb_test/processes"); n != 2 { // creation + stdin/close, never re-created
		t.Errorf("%d process posts", n)
	}
}

// executeManaged is Execute on the managed-process path (the fallback for
// origins without streaming exec): the command protocol tests below are
// the reference's, which v0.3 keeps for managed processes.
func (d *Driver) executeManaged(ctx context.Context, p *handlers.ExecuteParams, out handlers.OutputSink) (*handlers.ExecuteResult, error) {
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallExecute, p.Config, p.TimeoutMs))
	defer cancel()
	return track(ctx, d, &p.BaseParams, &p.Lease, (*config.TimeoutMs)(p.TimeoutMs), func(ctx context.Context, k *call) (*handlers.ExecuteResult, error) {
		return d.commands.RunManaged(ctx, command.Request{Client: k.c, Sandbox: p.Lease.LeaseID(), Spec: executeCommand(p), Sink: out, CleanupTimeout: k.timeout()})
	})
}

// The driver's copy of the provider's body limit is the figure the sim
// enforces: a batch the driver builds to fit is one the sim takes.
func TestRequestLimitIsTheSims(t *testing.T) {
	if api.MaxRequestBody != createostest.MaxRequestBody {
		t.Errorf("api.MaxRequestBody %d, createostest.MaxRequestBody %d", api.MaxRequestBody, createostest.MaxRequestBody)
	}
}
