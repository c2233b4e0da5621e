package createos

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Host call shapes that the scripted provider is enough for.

// The host sends timeoutMs as any JSON number: an agent's timeoutSec ×
// 1000 (a day or more, not always whole) on the agent launch and on every
// post-upload command, 15,000 for its probes, 0 when an adapter passes
// timeoutSec 0. None is refused.
func TestCommandTimeoutTakesWhatTheHostSends(t *testing.T) {
	cfg := config.Config{TimeoutMs: 600_000}
	for _, tc := range []struct {
		name string
		ms   *float64
		want time.Duration
	}{
		{"absent: the config's", nil, 10 * time.Minute},
		{"run timeout", ptr(14_400_000.0), 4 * time.Hour},
		{"past a day", ptr(172_800_000.0), 48 * time.Hour},
		{"fraction", ptr(1500.5), 1500500 * time.Microsecond},
		{"below a nanosecond: 1 ms", ptr(1e-7), time.Millisecond},
		{"below a millisecond: 1 ms", ptr(0.25), time.Millisecond},
		{"probe", ptr(15_000.0), 15 * time.Second},
		{"0: the config's", ptr(0.0), 10 * time.Minute},
		{"negative: the config's", ptr(-1.0), 10 * time.Minute},
		{"NaN: the config's", ptr(math.NaN()), 10 * time.Minute},
		{"saturates", ptr(1e300), math.MaxInt64},
		{"just past a Duration", ptr(float64(math.MaxInt64 / int64(time.Millisecond))), math.MaxInt64},
		{"infinity saturates", ptr(math.Inf(1)), math.MaxInt64},
	} {
		if got := (*config.TimeoutMs)(tc.ms).Or(cfg.Timeout()); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Execute and post-upload commands with the host's timeouts run; a
// post-upload command's own positive timeout still ends it, and one of 0
// leaves it to the sync call's deadline. Each part runs in a synctest
// bubble: time moves only when the driver and the scripted provider both wait, so a
// deadline falls while the command runs, never during its creation, and
// the time a call took says which deadline ended it.
func TestHostTimeoutsAreHonouredNotRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(t)
		d := s.driver()
		l := acquire(t, d, nil)
		for _, ms := range []float64{14_400_000, 172_800_000, 1e300, 1500.5, 0, -1} {
			p := execParams(l, nil)
			p.TimeoutMs = ptr(ms)
			res, err := d.Execute(t.Context(), p, nil)
			if err != nil || res.TimedOut || res.ExitCode == nil || *res.ExitCode != 0 {
				t.Errorf("execute timeoutMs %v: %+v %v", ms, res, err)
			}
		}
	})

	for _, tc := range []struct {
		name    string
		config  handlers.Object // the sync call's config: its timeoutMs is the call's deadline
		ms      float64
		command string
		want    string        // "" = succeeds
		took    time.Duration // the deadline that ends it; 0 = none
	}{
		{"past a day", nil, 172_800_000, "true", "", 0},
		{"saturates", nil, 1e300, "true", "", 0},
		{"fraction", nil, 1500.5, "true", "", 0},
		{"0", nil, 0, "true", "", 0},
		{"own deadline ends it", nil, 50, "block", "CreateOS transfer command failed.", 50 * time.Millisecond},
		{"0: the sync's deadline ends it", handlers.Object{"timeoutMs": 1000.0}, 0, "block", "CreateOS transfer command failed.", time.Second},
		{"a day past the sync's deadline", handlers.Object{"timeoutMs": 1000.0}, 86_400_000, "block", "CreateOS transfer command failed.", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := newSyncScripted(t)
				s.running = func(r *http.Request, c string) {
					if c == "block" {
						// A command that never exits: its stream is cut
						// when the driver goes, with no exit frame.
						<-r.Context().Done()
						panic(http.ErrAbortHandler)
					}
				}
				o := op("o")
				o.PostUploadCommands = []handlers.PostUploadCommand{{Command: tc.command, TimeoutMs: ptr(tc.ms)}}
				p := s.params(o)
				p.Config = baseConfig(tc.config)
				start := time.Now()
				_, err := s.d.SyncIn(t.Context(), p)
				if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				if took := time.Since(start); took != tc.took {
					t.Errorf("took %v, want %v", took, tc.took)
				}
				if got := s.gotCommands(); len(got) != 2 || got[1] != tc.command {
					t.Errorf("commands %q", got)
				}
			})
		})
	}
}

// The host's orphan cleanup destroys a lease after its environment was
// deleted, with environmentId "" and the lease metadata it recorded: the
// lease's own environment stands in (its running calls are stopped first),
// while another company, another origin or a named other environment is
// still refused.
func TestOrphanDestroyWithAnEmptyEnvironmentID(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *handlers.DestroyLeaseParams)
		want string // "" = destroyed
	}{
		{"orphan", func(p *handlers.DestroyLeaseParams) { p.EnvironmentID = "" }, ""},
		{"orphan of another company", func(p *handlers.DestroyLeaseParams) { p.EnvironmentID, p.CompanyID = "", "company-b" }, "does not belong"},
		{"orphan at another origin", func(p *handlers.DestroyLeaseParams) {
			p.EnvironmentID = ""
			p.Config = baseConfig(handlers.Object{"apiUrl": "https://other.example.test"})
		}, "does not belong"},
		{"named other environment", func(p *handlers.DestroyLeaseParams) { p.EnvironmentID = "env-b" }, "does not belong"},
		{"metadata without an environment", func(p *handlers.DestroyLeaseParams) {
			p.EnvironmentID = ""
			md := handlers.Object{}
			for k, v := range p.LeaseMetadata {
				md[k] = v
			}
			delete(md, "environmentId")
			p.LeaseMetadata = md
		}, "does not belong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			l := acquire(t, d, nil)
			// The recorded metadata: host keys around ours.
			md := handlers.Object{"pluginId": "plugin-uuid", "sandboxProviderPlugin": true, "sandboxLeaseAcquisition": handlers.Object{"outcome": "created"}}
			for k, v := range l.Metadata {
				md[k] = v
			}
			l.Metadata = md
			s.reset()
			p := releaseParams(l, nil)
			tc.edit(p)
			_, err := d.DestroyLease(t.Context(), p)
			if tc.want != "" {
				wantErr(t, err, tc.want)
				if n := lastIndex(s.snapshot(), "DELETE /v1/sandboxes/sb_test"); n >= 0 {
					t.Errorf("sandbox deleted: %v", s.snapshot())
				}
				return
			}
			if err != nil || lastIndex(s.snapshot(), "DELETE /v1/sandboxes/sb_test") < 0 {
				t.Fatalf("%v: %v", err, s.snapshot())
			}
		})
	}

	// A call still running on the lease is stopped (its process deleted)
	// before the sandbox is.
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) { <-r.Context().Done() }
	errc := make(chan error, 1)
	go func() {
		_, err := d.executeManaged(t.Context(), execParams(l, nil), nil)
		errc <- err
	}()
	<-s.connected
	p := releaseParams(l, nil)
	p.EnvironmentID = ""
	if _, err := d.DestroyLease(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	wantErr(t, <-errc, "CreateOS command was cancelled.")
	proc, sb := s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test"), lastIndex(s.snapshot(), "DELETE /v1/sandboxes/sb_test")
	if proc < 0 || sb < 0 || proc > sb {
		t.Errorf("process DELETE at %d, sandbox DELETE at %d: %v", proc, sb, s.snapshot())
	}
}

// lastIndex is the index of the last call that is exactly "METHOD path".
func lastIndex(calls []scriptedCall, call string) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].String() == call {
			return i
		}
	}
	return -1
}

// Sync-in of a referenced project keeps its symlinks as links (absolute and
// leaving the tree included) and applies the host's exclude entries, raw
// and escaped, to the archive.
func TestHostProjectUploadKeepsLinksAndExcludesIgnoredPaths(t *testing.T) {
	s := newSyncScripted(t)
	project := t.TempDir()
	for name, content := range map[string]string{"doc.md": "doc", "app/[id]/page.tsx": "x", "app/[id/x": "x", "app/i/keep.tsx": "k", "node_modules/m/i.js": "m"} {
		testkit.WriteFile(t, filepath.Join(project, name), content, 0o644)
	}
	must(t, os.Symlink("/usr/bin/env", filepath.Join(project, "abs")))
	must(t, os.Symlink("../elsewhere", filepath.Join(project, "out")))
	m := handlers.SyncFileMapping{SourcePath: project, TargetPath: "/paperclip-workspace/.paperclip-runtime/claude_local/project-p1", Kind: "directory",
		Exclude: []string{"node_modules", "node_modules/*", "*/node_modules", "*/node_modules/*", ".git", `app/\[id]`, "app/[id"}}
	res, err := s.d.SyncIn(t.Context(), s.params(op("sync-op-3", m)))
	if err != nil || res.Operations[0].FilesTransferred != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	hdrs := tarHeaders(t, s.gotUploads()[0].Body)
	if got := strings.Join(tarNames(t, s.gotUploads()[0].Body), " "); got != "./ ./abs ./app/ ./app/i/ ./app/i/keep.tsx ./doc.md ./out" {
		t.Errorf("archived %s", got)
	}
	if hdrs["./abs"].Linkname != "/usr/bin/env" || hdrs["./out"].Linkname != "../elsewhere" {
		t.Errorf("links %q %q", hdrs["./abs"].Linkname, hdrs["./out"].Linkname)
	}
}

// A positive timeoutMs below a millisecond (1e-7 rounds to no time at all)
// is a 1 ms deadline: the process is created and followed, then times out,
// instead of a deadline already past that made creation unconfirmed and
// poisoned the lease.
func TestTinyPositiveTimeoutIsOneMillisecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(t)
		d := s.driver()
		l := acquire(t, d, nil)
		s.stream = func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
			if n == 1 {
				neverEnds(w, r, body, n) // the first command never exits
				return
			}
			ndjson(w, `{"exit_code":0}`)
		}
		p := execParams(l, nil)
		p.TimeoutMs = ptr(1e-7)
		start := time.Now()
		res, err := d.Execute(t.Context(), p, nil)
		if err != nil || !res.TimedOut {
			t.Fatalf("timeoutMs 1e-7: %+v %v, want a timed-out result of the created process", res, err)
		}
		if took := time.Since(start); took != time.Millisecond {
			t.Errorf("took %v, want 1ms", took)
		}
		if res, err := d.Execute(t.Context(), execParams(l, nil), nil); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Errorf("the lease is still usable: %+v %v", res, err)
		}
	})
}
