package createos

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

const (
	accountA = "0123456789abcdef0123456789abcdef"
	accountB = "fedcba9876543210fedcba9876543210"
)

// marksIn is a store in a directory of the test's own (not yet created).
func marksIn(t *testing.T) cleanupMarks {
	return cleanupMarks{dir: filepath.Join(t.TempDir(), "marks")}
}

func mustList(t *testing.T, m cleanupMarks, account string) []string {
	t.Helper()
	ids, err := m.list(account)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	slices.Sort(ids)
	return ids
}

func TestCleanupMarksStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, m cleanupMarks)
	}{
		{"add, has, list, remove, and nothing left", func(t *testing.T, m cleanupMarks) {
			if err := m.add(accountA, "https://api.example.test", "sb_1"); err != nil {
				t.Fatal(err)
			}
			if !m.has(accountA, "sb_1") || m.has(accountB, "sb_1") || m.has(accountA, "sb_2") {
				t.Error("has")
			}
			fi, err := os.Lstat(m.dir)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("dir mode %v %v", fi, err)
			}
			fi, err = os.Lstat(filepath.Join(m.dir, accountA+".sb_1"))
			if err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
				t.Errorf("mark mode %v %v", fi, err)
			}
			if got := mustList(t, m, accountA); !slices.Equal(got, []string{"sb_1"}) {
				t.Errorf("list %v", got)
			}
			if err := m.remove(accountA, "sb_1"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the empty directory is left: %v", err)
			}
		}},
		{"no directory: nothing marked, removing is no error", func(t *testing.T, m cleanupMarks) {
			if m.has(accountA, "sb_1") || len(mustList(t, m, accountA)) != 0 {
				t.Error("marks without a directory")
			}
			if err := m.remove(accountA, "sb_1"); err != nil {
				t.Error(err)
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("reading created the directory: %v", err)
			}
		}},
		{"accounts apart; the directory stays while a mark is left", func(t *testing.T, m cleanupMarks) {
			for _, a := range []struct{ account, id string }{{accountA, "sb_1"}, {accountA, "sb_2"}, {accountB, "sb_1"}} {
				if err := m.add(a.account, "https://api.example.test", a.id); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.add(accountA, "https://api.example.test", "sb_1"); err != nil { // again: one mark
				t.Fatal(err)
			}
			if got := mustList(t, m, accountA); !slices.Equal(got, []string{"sb_1", "sb_2"}) {
				t.Errorf("account A %v", got)
			}
			if got := mustList(t, m, accountB); !slices.Equal(got, []string{"sb_1"}) {
				t.Errorf("account B %v", got)
			}
			if err := m.remove(accountA, "sb_1"); err != nil {
				t.Fatal(err)
			}
			if got := mustList(t, m, accountB); !slices.Equal(got, []string{"sb_1"}) {
				t.Errorf("account B after A's remove %v", got)
			}
			for _, a := range []struct{ account, id string }{{accountA, "sb_2"}, {accountB, "sb_1"}} {
				if err := m.remove(a.account, a.id); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the empty directory is left: %v", err)
			}
		}},
		{"names are checked before they become file names", func(t *testing.T, m cleanupMarks) {
			for _, c := range []struct{ account, id string }{
				{accountA, ""}, {accountA, "../x"}, {accountA, "a/b"}, {accountA, "."}, {accountA, ".tmp-x"},
				{accountA, "a.b"}, {accountA, strings.Repeat("a", 201)}, {accountA, "sb\x00"},
				{"", "sb_1"}, {"../" + accountA[3:], "sb_1"}, {strings.ToUpper(accountA), "sb_1"}, {accountA + "0", "sb_1"},
			} {
				if err := m.add(c.account, "https://api.example.test", c.id); err == nil {
					t.Errorf("add(%q, %q) accepted", c.account, c.id)
				}
				if err := m.remove(c.account, c.id); err == nil {
					t.Errorf("remove(%q, %q) accepted", c.account, c.id)
				}
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused name created the directory: %v", err)
			}
		}},
		{"a directory open to others, or a link, is never used", func(t *testing.T, m cleanupMarks) {
			if err := os.Mkdir(m.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(m.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := m.add(accountA, "https://api.example.test", "sb_1"); !errors.Is(err, errCleanupDir) {
				t.Errorf("add in a 0755 directory: %v", err)
			}
			if err := os.WriteFile(filepath.Join(m.dir, accountA+".sb_1"), []byte(`{"origin":"x","sandbox":"sb_1"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := m.list(accountA); !errors.Is(err, errCleanupDir) {
				t.Errorf("list in a 0755 directory: %v", err)
			}
			if m.has(accountA, "sb_1") {
				t.Error("a mark in a 0755 directory counts")
			}
			private := filepath.Join(filepath.Dir(m.dir), "private")
			if err := os.Mkdir(private, 0o700); err != nil {
				t.Fatal(err)
			}
			link := cleanupMarks{dir: filepath.Join(filepath.Dir(m.dir), "link")}
			if err := os.Symlink(private, link.dir); err != nil {
				t.Fatal(err)
			}
			if err := link.add(accountA, "https://api.example.test", "sb_1"); !errors.Is(err, errCleanupDir) {
				t.Errorf("add through a link: %v", err)
			}
			if _, err := link.list(accountA); !errors.Is(err, errCleanupDir) {
				t.Errorf("list through a link: %v", err)
			}
		}},
		{"a file that is not a whole mark of its name is skipped; a dead writer's temp goes", func(t *testing.T, m cleanupMarks) {
			if err := m.add(accountA, "https://api.example.test", "sb_ok"); err != nil {
				t.Fatal(err)
			}
			write := func(name, data string) string {
				p := filepath.Join(m.dir, name)
				if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			write(accountA+".sb_half", `{"origin":"https://api.exa`)
			write(accountA+".sb_other", `{"origin":"https://api.example.test","sandbox":"sb_else"}`)
			write(accountA+".sb_bad.x", `{"origin":"https://api.example.test","sandbox":"sb_bad.x"}`)
			if err := os.Mkdir(filepath.Join(m.dir, accountA+".sb_dir"), 0o700); err != nil {
				t.Fatal(err)
			}
			fresh := write(markTempPrefix+"fresh", `{"origin":"https://api.example.test","sandbox":"sb_tmp"}`)
			stale := write(markTempPrefix+"stale", `{"origin":"https://api.example.test","sandbox":"sb_tmp"}`)
			old := time.Now().Add(-2 * staleMarkTemp)
			if err := os.Chtimes(stale, old, old); err != nil {
				t.Fatal(err)
			}
			if got := mustList(t, m, accountA); !slices.Equal(got, []string{"sb_ok"}) {
				t.Errorf("list %v", got)
			}
			if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a stale temporary mark is left: %v", err)
			}
			if _, err := os.Lstat(fresh); err != nil {
				t.Errorf("a mark being written was removed: %v", err)
			}
		}},
		{"workers at once: every add lands, every list reads whole marks, nothing is left", func(t *testing.T, m cleanupMarks) {
			var wg sync.WaitGroup
			errs := make(chan error, 8*50*2)
			for w := range 8 {
				wg.Go(func() {
					id := "sb_" + strconv.Itoa(w)
					for range 50 {
						if err := m.add(accountA, "https://api.example.test", id); err != nil {
							errs <- fmt.Errorf("add %s: %w", id, err)
							return
						}
						ids, err := m.list(accountA)
						if err != nil || !slices.Contains(ids, id) {
							errs <- fmt.Errorf("list after add %s: %v %v", id, ids, err)
							return
						}
						if err := m.remove(accountA, id); err != nil {
							errs <- fmt.Errorf("remove %s: %w", id, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the empty directory is left: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, marksIn(t)) })
	}
}

// markedServer is a createostest server and a driver whose cleanup marks
// are kept in dir; a second driver on the same dir is the next worker.
func markedServer(t *testing.T) (*createostest.Server, handlers.BaseParams) {
	t.Helper()
	createostest.RequireIsolation(t)
	srv := createostest.NewServer(t, createostest.Options{APIKey: "test-secret", Heartbeat: 50 * time.Millisecond})
	cfg := handlers.Object{"apiUrl": srv.URL, "apiKey": "test-secret", "shape": "s-1vcpu-1gb", "timeoutMs": float64(20000)}
	return srv, handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
}

func markedDriver(srv *createostest.Server, dir string) *Driver {
	d := New(WithHTTPClient(srv.Client()), WithPacer(api.NoPacing), WithGetenv(func(string) string { return "" }), WithCleanupDir(dir))
	d.pollInterval = 5 * time.Millisecond
	return d
}

// marksOf lists the marks in dir of the test server's account.
func marksOf(t *testing.T, d *Driver, bp handlers.BaseParams) []string {
	t.Helper()
	_, c, err := d.configured(bp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return mustList(t, d.marks(), markAccount(c))
}

// leftUnconfirmed is a worker whose release of a disposable lease could
// not delete its sandbox: the server, the params, the marks directory,
// the worker and the lease.
func leftUnconfirmed(t *testing.T) (*createostest.Server, handlers.BaseParams, string, *Driver, *handlers.Lease) {
	t.Helper()
	srv, bp := markedServer(t)
	dir := filepath.Join(t.TempDir(), "marks")
	first := markedDriver(srv, dir)
	l, err := first.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run"})
	if err != nil {
		t.Fatal(err)
	}
	releaseFailing(t, srv, first, bp, l)
	return srv, bp, dir, first, l
}

// releaseFailing releases l (a disposable lease: release deletes it) with
// every sandbox DELETE answered 500.
func releaseFailing(t *testing.T, srv *createostest.Server, d *Driver, bp handlers.BaseParams, l *handlers.Lease) {
	t.Helper()
	srv.Faults().Inject(createostest.RouteDelete, http.StatusInternalServerError, createostest.Always)
	defer srv.Faults().Reset()
	if _, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err == nil {
		t.Fatal("a release whose delete failed succeeded")
	}
}

// Crash-proof (issue 19): a release whose delete fails leaves a mark on
// disk, and the next worker's acquire on the same account deletes the
// sandbox and removes the mark; a delete that fails again keeps it.
func TestCleanupMarkOutlivesTheWorkerAndTheNextAcquireFinishesIt(t *testing.T) {
	srv, bp, dir, first, l := leftUnconfirmed(t)
	id := l.LeaseID()
	if got := marksOf(t, first, bp); !slices.Equal(got, []string{id}) {
		t.Fatalf("marks after a failed delete %v, want [%s]", got, id)
	}
	if _, ok := srv.Sandbox(id); !ok {
		t.Fatal("the sandbox is gone although its delete failed")
	}
	data, err := os.ReadFile(filepath.Join(dir, markAccount(mustClient(t, first, bp))+"."+id))
	if err != nil || strings.Contains(string(data), "test-secret") || !strings.Contains(string(data), id) {
		t.Errorf("mark %q %v", data, err)
	}

	// The next worker: its acquire's delete of the marked sandbox fails
	// once, and the mark stays; the one after finishes the cleanup.
	next := markedDriver(srv, dir)
	srv.Faults().Inject(createostest.RouteDelete, http.StatusInternalServerError, 1)
	l2, err := next.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run-2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := marksOf(t, next, bp); !slices.Equal(got, []string{id}) {
		t.Fatalf("marks after a second failed delete %v, want [%s]", got, id)
	}
	l3, err := next.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run-3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(id); ok {
		t.Error("the next acquire left the marked sandbox")
	}
	if _, ok := srv.Sandbox(l2.LeaseID()); !ok {
		t.Error("the next acquire deleted a live lease's sandbox")
	}
	for _, l := range []*handlers.Lease{l2, l3} {
		if _, err := next.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("marks are left on disk once all is clean: %v", err)
	}
}

func mustClient(t *testing.T, d *Driver, bp handlers.BaseParams) *api.Client {
	t.Helper()
	_, c, err := d.configured(bp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The host's destroy of a lease whose cleanup a worker before this one
// left unconfirmed deletes it and removes the mark; another account's
// acquire leaves the mark alone.
func TestCleanupMarkRemovedByTheHostsDestroy(t *testing.T) {
	srv, bp, dir, _, l := leftUnconfirmed(t)
	id := l.LeaseID()

	next := markedDriver(srv, dir)
	if _, err := next.DestroyLease(t.Context(), &handlers.DestroyLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(id); ok {
		t.Error("destroy left the sandbox")
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("destroy left the mark: %v", err)
	}
}

// A lease whose process containment is unproven is not kept warm (the
// release says to destroy it), and that decision outlives the worker: the
// next worker refuses to resume the sandbox and the host's destroy
// finishes it.
func TestCleanupMarkOfAnUnprovenLeaseRefusesResume(t *testing.T) {
	srv, bp := markedServer(t)
	bp.Config = with(bp.Config, "reuseLease", true)
	dir := filepath.Join(t.TempDir(), "marks")
	first := markedDriver(srv, dir)
	p := heartbeatAcquire(bp)
	l, err := first.AcquireLease(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	id := l.LeaseID()
	scope, err := first.scope(&bp, id)
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := first.configured(bp.Config)
	if err != nil {
		t.Fatal(err)
	}
	first.poison(t.Context(), c, scope, id) // as an execute whose cleanup is unconfirmed does (track)
	rel := &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}
	if _, err := first.ReleaseLease(t.Context(), rel); !errors.Is(err, errUnconfirmedReuse) {
		t.Fatalf("release of a poisoned lease: %v", err)
	}
	if got := marksOf(t, first, bp); !slices.Equal(got, []string{id}) {
		t.Fatalf("marks %v, want [%s]", got, id)
	}

	next := markedDriver(srv, dir)
	if _, err := next.ResumeLease(t.Context(), &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: id, LeaseMetadata: l.Metadata}); !errors.Is(err, errResumeWhileClose) {
		t.Errorf("resume of a marked sandbox: %v", err)
	}
	// A warm release of the marked sandbox deletes it instead.
	if _, err := next.ReleaseLease(t.Context(), rel); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(id); ok {
		t.Error("a marked sandbox was kept warm")
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the mark is left: %v", err)
	}
}
