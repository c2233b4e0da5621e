package createos

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

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
			s := newScripted(t)
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
