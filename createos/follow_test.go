package createos

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The wait answer as the v0.3 reference reads it (recoverProcessExit).
func TestRecoveredExitOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		cursor int64
		code   *int
		signal *string
		newest int64
		err    error
	}{
		{"the fixture's answer", `{"state":"exited","tree_exited":true,"exit_code":0,"signal":"","output":{"newest_seq":1}}`, 1, ptr(0), nil, 1, nil},
		{"a signal", `{"exit_code":null,"signal":"SIGKILL","output":{"newest_seq":4}}`, 2, nil, ptr("SIGKILL"), 4, nil},
		{"code and signal", `{"exit_code":143,"signal":"SIGTERM","output":{"newest_seq":0}}`, 0, ptr(143), ptr("SIGTERM"), 0, nil},
		{"no output", `{"exit_code":0}`, 0, nil, nil, 0, errInvalidResponse},
		{"output not an object", `{"exit_code":0,"output":[1]}`, 0, nil, nil, 0, errInvalidResponse},
		{"no newest_seq", `{"exit_code":0,"output":{}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq a string", `{"exit_code":0,"output":{"newest_seq":"1"}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq fractional", `{"exit_code":0,"output":{"newest_seq":1.5}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq unsafe", `{"exit_code":0,"output":{"newest_seq":9007199254740992}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq behind the cursor", `{"exit_code":0,"output":{"newest_seq":2}}`, 3, nil, nil, 0, errJournalInvalid},
		{"no exit", `{"exit_code":null,"signal":"","output":{"newest_seq":1}}`, 1, nil, nil, 0, errExitMissing},
		{"a signal that is not one", `{"signal":"TERM","output":{"newest_seq":1}}`, 1, nil, nil, 0, errExitMissing},
		{"a fractional code", `{"exit_code":1.5,"output":{"newest_seq":1}}`, 1, nil, nil, 0, errExitMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := asObject([]byte(tc.data))
			if !ok {
				t.Fatal("bad fixture")
			}
			rec, err := recoveredExitOf(o, tc.cursor)
			if err != tc.err {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if !equalPtr(rec.exit.code, tc.code) || !equalPtr(rec.exit.signal, tc.signal) || rec.newestSeq != tc.newest {
				t.Errorf("%+v (code %v, signal %v)", rec, deref(rec.exit.code), deref(rec.exit.signal))
			}
		})
	}
}

func equalPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// What a managed command's cleanup removes.
func TestLeftovers(t *testing.T) {
	const gate, stdin = "/tmp/g", "/tmp/s"
	for _, tc := range []struct {
		name             string
		gateSent, exited bool
		stdin            string
		want             []string
	}{
		{"exited, no stdin: nothing (the script removed the gate)", true, true, "", nil},
		{"exited with stdin", true, true, stdin, []string{gate, stdin}},
		{"failed after the gate", true, false, "", []string{gate}},
		{"failed before the gate", false, false, "", nil},
		{"failed before the gate, with stdin", false, false, stdin, []string{stdin}},
	} {
		if got := leftovers(gate, tc.gateSent, tc.exited, tc.stdin); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A wait answer the driver cannot use fails the command, whose tree is
// then deleted and whose gate removed: connect, stdin/close, the gate,
// three reconnects, wait, DELETE, rm.
func TestCommandRejectsUnusableWaitAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(w http.ResponseWriter)
		want string
	}{
		{"journal invalid", func(w http.ResponseWriter) {
			success(w, map[string]any{"exit_code": 0, "output": map[string]any{"newest_seq": -1}})
		}, "CreateOS process output journal is invalid."},
		{"no output", func(w http.ResponseWriter) { success(w, map[string]any{"exit_code": 0}) }, "CreateOS returned an invalid response."},
		{"exit missing", func(w http.ResponseWriter) {
			success(w, map[string]any{"signal": "", "output": map[string]any{"newest_seq": 0}})
		}, "CreateOS process exit status is missing."},
		{"not found", func(w http.ResponseWriter) { failWith(w, http.StatusNotFound) }, "CreateOS request failed (HTTP 404) during process cleanup."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t)
			d := s.driver()
			l := acquire(t, d, nil)
			s.reset()
			s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"heartbeat"}`) }
			s.wait = func(w http.ResponseWriter, r *http.Request, n int) { tc.wait(w) }
			_, err := d.executeManaged(t.Context(), execParams(l, nil), nil)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			var got []string
			for _, c := range s.snapshot() {
				path, _, _ := strings.Cut(c.Path, "?")
				got = append(got, c.Method+" "+path)
			}
			const p = "/v1/sandboxes/sb_test/processes"
			want := []string{"POST " + p, "GET " + p + "/proc_test/connect", "POST " + p + "/proc_test/stdin/close", "PUT /v1/sandboxes/sb_test/files",
				"GET " + p + "/proc_test/connect", "GET " + p + "/proc_test/connect", "GET " + p + "/proc_test/connect",
				"GET " + p + "/proc_test/wait", "DELETE " + p + "/proc_test", "POST /v1/sandboxes/sb_test/exec"}
			if !slices.Equal(got, want) {
				t.Errorf("calls\n%v\nwant\n%v", got, want)
			}
			if i := s.find("GET " + p + "/proc_test/wait?scope=tree&timeout_ms=30000"); i < 0 {
				t.Errorf("wait query: %v", s.snapshot())
			}
		})
	}
}
