package createos

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

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
	d := New(WithHTTPClient(srv.Client()), WithPacer(schedtest.NoPacing), WithGetenv(func(string) string { return "" }), WithCleanupDir(dir))
	d.pollInterval = 5 * time.Millisecond
	return d
}

// marksOf lists the marks in dir of the test server's account.
func marksOf(t *testing.T, d *Driver, bp handlers.BaseParams) []string {
	t.Helper()
	k, err := d.parse(&bp)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := d.marks().List(markAccount(k.c))
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	slices.Sort(ids)
	return ids
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

// Crash-proof: a release whose delete fails leaves a mark on
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
	k, err := d.parse(&bp)
	if err != nil {
		t.Fatal(err)
	}
	c := k.c
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
	k, err := first.parse(&bp)
	if err != nil {
		t.Fatal(err)
	}
	first.poison(t.Context(), k.c, k.scope(id), id) // as an execute whose cleanup is unconfirmed does (track)
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
