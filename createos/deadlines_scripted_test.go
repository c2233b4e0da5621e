package createos

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// hanging is a hook that never answers the requests match selects: each
// waits until the driver gives up on it. The others reach the scripted provider.
func hanging(match func(r *http.Request) bool) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if !match(r) {
			return false
		}
		<-r.Context().Done()
		return true
	}
}

func sandboxDeletion(r *http.Request) bool {
	return r.Method == http.MethodDelete && r.URL.Path == "/v1/sandboxes/sb_test"
}

func either(a, b func(*http.Request) bool) func(*http.Request) bool {
	return func(r *http.Request) bool { return a(r) || b(r) }
}

// neverExits is a connect that shows a command that never exits.
func neverExits(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }

// neverEnds is a streaming exec of a command that never exits.
func neverEnds(w http.ResponseWriter, r *http.Request, _ []byte, _ int) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// Every call answers before the host stops waiting for it, even when the
// provider never answers a cleanup request: cleanup gets what is left of
// the call's budget, not a fresh config.timeoutMs. The budgets are the
// host's (deadlines.go); each case ran past it before (the time it took
// then is noted). In a synctest bubble time moves only when the driver
// and the scripted provider both wait, so the time a call took is exact.
func TestEveryCallAnswersWithinTheHostsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget time.Duration // the host's
		call   func(t *testing.T, s *scripted, d *Driver) error
	}{
		{"execute: timeoutMs 500, config 35 s, the command never exits", 30500 * time.Millisecond,
			func(t *testing.T, s *scripted, d *Driver) error {
				l := acquire(t, d, nil)
				s.stream = neverEnds
				p := execParams(l, handlers.Object{"timeoutMs": 35000.0})
				p.TimeoutMs = ptr(500.0)
				res, err := d.Execute(t.Context(), p, nil)
				if err == nil && !res.TimedOut {
					t.Errorf("result %+v, want timed out", res)
				}
				return err
			}},
		{"acquire: config 32 s, workspace command and sandbox delete hang (was 64 s)", 62 * time.Second,
			func(t *testing.T, s *scripted, d *Driver) error {
				s.hook = hanging(either(execRequest, sandboxDeletion))
				_, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(handlers.Object{"timeoutMs": 32000.0}), RunID: "r"})
				return wantText(err, errSetupUnconfirmed("sb_test").Error())
			}},
		{"probe: default timeout, workspace command and sandbox delete hang (was 600 s)", 120 * time.Second,
			func(t *testing.T, s *scripted, d *Driver) error {
				s.hook = hanging(either(execRequest, sandboxDeletion))
				res, err := d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: base(handlers.Object{"timeoutMs": nil})})
				if err != nil {
					return err
				}
				return wantText(errorText(res.OK, strings.TrimSuffix(res.Summary, probeSignature)), errSetupUnconfirmed("sb_test").Error())
			}},
		{"probe: default timeout, echo never exits (was 600 s)", 120 * time.Second,
			func(t *testing.T, s *scripted, d *Driver) error {
				s.stream = neverEnds
				res, err := d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: base(handlers.Object{"timeoutMs": nil})})
				if err != nil {
					return err
				}
				if last := s.last(); last.String() != "DELETE /v1/sandboxes/sb_test" || last.Aborted {
					t.Errorf("the sandbox was not deleted in time: last call %s (aborted %v)", last, last.Aborted)
				}
				return wantText(errorText(res.OK, strings.TrimSuffix(res.Summary, probeSignature)), errProbeCommand.Error())
			}},
		{"resume: config 100 s, marker read hangs (was 100 s)", 60 * time.Second,
			func(t *testing.T, s *scripted, d *Driver) error {
				l := acquire(t, d, reuse)
				s.hook = hanging(execRequest)
				over := cloneObject(reuse)
				over["timeoutMs"] = 100000.0
				_, err := d.ResumeLease(t.Context(), resumeParams(l, over))
				return wantIs(err, deadline.ErrTimedOut)
			}},
		{"release: config 35 s, a running command and the sandbox delete hang (was 70 s)", 65 * time.Second,
			func(t *testing.T, s *scripted, d *Driver) error {
				l := acquire(t, d, nil)
				started := make(chan struct{})
				s.stream = func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
					close(started)
					neverEnds(w, r, body, n)
				}
				s.hook = hanging(sandboxDeletion)
				over := handlers.Object{"timeoutMs": 35000.0}
				executed := make(chan error, 1)
				go func() {
					_, err := d.Execute(t.Context(), execParams(l, over), nil)
					executed <- err
				}()
				<-started
				_, err := d.ReleaseLease(t.Context(), releaseParams(l, over))
				if err := wantIs(<-executed, command.ErrCancelled); err != nil {
					t.Errorf("the stopped command: %v", err)
				}
				return wantIs(err, deadline.ErrTimedOut)
			}},
		{"syncIn: config 35 s, post-upload command never exits (was 70 s)", 65 * time.Second,
			func(t *testing.T, _ *scripted, _ *Driver) error {
				s := newSyncScripted(t)
				s.running = func(r *http.Request, c string) {
					if c == "block" {
						<-r.Context().Done()
						panic(http.ErrAbortHandler)
					}
				}
				o := op("o")
				o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "block"}}
				p := s.params(o)
				p.Config = baseConfig(handlers.Object{"timeoutMs": 35000.0})
				_, err := s.d.SyncIn(t.Context(), p)
				return wantIs(err, filesync.ErrTransferCommand)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScripted(t)
				d := s.driver()
				start := time.Now()
				err := tc.call(t, s, d)
				took := time.Since(start)
				if err != nil {
					t.Error(err)
				}
				if took >= tc.budget {
					t.Errorf("answered after %v; the host stops waiting at %v", took, tc.budget)
				}
			})
		})
	}
}

// wantIs reports err unless it is want.
func wantIs(err, want error) error {
	if err != want {
		return &mismatch{got: err, want: want.Error()}
	}
	return nil
}

// wantText reports err unless its text is want.
func wantText(err error, want string) error {
	if err == nil || err.Error() != want {
		return &mismatch{got: err, want: want}
	}
	return nil
}

type mismatch struct {
	got  error
	want string
}

func (m *mismatch) Error() string { return "error " + errString(m.got) + ", want " + m.want }

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// errorText is a failed probe's summary as an error (nil for a success).
func errorText(ok bool, summary string) error {
	if ok {
		return nil
	}
	return &textError{summary}
}

type textError struct{ s string }

func (e *textError) Error() string { return e.s }
