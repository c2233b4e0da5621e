package createos

import (
	"reflect"
	"slices"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// How sessions and the lease's end meet, against createostest.

// A session whose tree's end is unconfirmed leaves the lease unfit to be
// kept: Close says so, and the release that would pause the sandbox
// deletes it instead and answers a destroyed receipt.
func TestUnconfirmedSessionCleanupDestroysInsteadOfKeeping(t *testing.T) {
	cases := []struct {
		name   string
		inject func(srv *createostest.Server)
		err    string
		// lost: the process still runs, so its end is the transport's;
		// a tree that is killed but not reported gone may exit first.
		lost bool
	}{
		{"tree not exited", func(srv *createostest.Server) { srv.Faults().TreeNotExited(1) },
			"CreateOS process tree termination was not confirmed.", false},
		{"delete failed", func(srv *createostest.Server) { srv.Faults().Inject(rDelete, 503, 1) },
			"CreateOS request failed (HTTP 503) during process cleanup.", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, d, bp := sessionServer(t, createostest.Options{})
			l := leaseOn(t, d, bp)
			sink := newRecSink(t)
			// SIGTERM alone does not end it: only the tree DELETE can.
			ch := openDuplex(t, d, bp, l, sink, "sh", "-c", `trap "" TERM; echo up; sleep 30`)
			sink.waitBytes([]byte("up\n"))
			tc.inject(srv)
			err := ch.Close(t.Context())
			wantErr(t, err, tc.err)
			if e, ok := sink.exit(); !ok || e.code != nil || tc.lost && !e.transportClosed {
				t.Fatalf("exit %+v %v (lost %v)", e, ok, tc.lost)
			}
			from := len(srv.Requests())
			rc, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata})
			if err != nil {
				t.Fatal(err)
			}
			if want := (&handlers.TerminationReceipt{ProviderLeaseID: l.LeaseID(), State: "destroyed"}); !reflect.DeepEqual(rc, want) {
				t.Fatalf("receipt %+v, want %+v", rc, want)
			}
			if got := routesSince(srv, from); !slices.Equal(got, []R{createostest.RouteDelete}) {
				t.Errorf("release requests %v, want the sandbox DELETE alone", got)
			}
			if sb, ok := srv.Sandbox(l.LeaseID()); ok && sb.Status != createostest.StateDestroyed {
				t.Errorf("sandbox %+v", sb)
			}
			// The lease is gone: no session opens on it, resume expires it.
			if _, err := d.OpenDuplex(t.Context(), &sessions.DuplexOpenParams{SessionBase: sessionBase(bp, l), Command: []string{"true"}}, newRecSink(t)); err != errSessionLease {
				t.Errorf("open after release: %v", err)
			}
			r, err := d.ResumeLease(t.Context(), &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata})
			if err != nil || !isExpired(r) {
				t.Errorf("resume %+v %v", r, err)
			}
		})
	}
}

// A release closes the sessions still open on the lease before it keeps
// the sandbox warm: one tree DELETE each, and no pause,
// Exit has reached the sink, and the route table's own Close later
// answers from the same close without a request.
func TestReleaseClosesOpenSessionsFirst(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	sink := newRecSink(t)
	ch := openDuplex(t, d, bp, l, sink, "sh", "-c", "cat >/dev/null; exec sleep 30")
	from := len(srv.Requests())
	rc, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata})
	if err != nil || rc != nil {
		t.Fatalf("release %+v %v", rc, err)
	}
	if _, ok := sink.exit(); !ok {
		t.Fatal("release returned before the session's Exit")
	}
	got := routesSince(srv, from)
	want := []R{rDelete}
	if !slices.Equal(got, want) {
		t.Errorf("release requests %v, want %v (and the sandbox kept warm)", got, want)
	}
	from = len(srv.Requests())
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()) - from; n != 0 {
		t.Errorf("the second close sent %d requests", n)
	}
}

// Sessions need a lease this worker acquired or resumed: a release forgets
// it, a resume caches it again, a shutdown forgets all and closes every
// session.
func TestSessionLeaseCache(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	open := func() (sessions.Channel, *recSink, error) {
		sink := newRecSink(t)
		ch, err := d.OpenDuplex(t.Context(), &sessions.DuplexOpenParams{SessionBase: sessionBase(bp, l), Command: []string{"sleep", "30"}}, sink)
		return ch, sink, err
	}
	other := sessionBase(bp, l)
	other.CompanyID = "company-b"
	if _, err := d.OpenDuplex(t.Context(), &sessions.DuplexOpenParams{SessionBase: other, Command: []string{"true"}}, newRecSink(t)); err != errSessionLease {
		t.Fatalf("another company's open: %v", err)
	}
	if _, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
		t.Fatal(err)
	}
	from := len(srv.Requests())
	if _, _, err := open(); err != errSessionLease {
		t.Fatalf("open after release: %v", err)
	}
	if n := len(srv.Requests()) - from; n != 0 {
		t.Errorf("a refused open sent %d requests", n)
	}
	r, err := d.ResumeLease(t.Context(), &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata})
	if err != nil || r.LeaseID() != l.LeaseID() {
		t.Fatalf("resume %+v %v", r, err)
	}
	_, sink, err := open()
	if err != nil {
		t.Fatalf("open after resume: %v", err)
	}
	if err := d.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := sink.exit(); !ok {
		t.Error("shutdown returned before the session's Exit")
	}
	if countRoute(srv, from, rDelete) != 1 {
		t.Error("shutdown did not delete the session's tree")
	}
	if _, _, err := open(); err != errSessionLease {
		t.Errorf("open after shutdown: %v", err)
	}
}
