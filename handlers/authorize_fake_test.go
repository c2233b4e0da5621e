package handlers_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/fake"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// A lease call the driver refuses (the right company,
// another environment, naming environment A's lease) ends nothing of A.

// fakeWire is a worker of one fake driver, as the host talks to it.
type fakeWire struct {
	t   *testing.T
	c   *rpctest.Conn
	seq int
}

func serveFake(t *testing.T) *fakeWire {
	t.Helper()
	d := fake.New(fake.WithTempDir(t.TempDir()))
	p := handlers.New(handlers.Options{}, d)
	c, _ := rpctest.Serve(t, p, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return &fakeWire{t: t, c: c}
}

// call sends a request and returns its reply and the frames before it.
func (w *fakeWire) call(method string, params map[string]any) (rpctest.Msg, []rpctest.Msg) {
	w.seq++
	return w.c.Call(w.seq, method, params, "", "")
}

// ok sends a request that must succeed and decodes its result into out.
func (w *fakeWire) ok(method string, params map[string]any, out any) []rpctest.Msg {
	w.t.Helper()
	m, before := w.call(method, params)
	if m.Error != nil {
		w.t.Fatalf("%s: error %d %q", method, m.Error.Code, m.Error.Message)
	}
	if out != nil {
		w.c.Result(m, out)
	}
	return before
}

// echo writes text on the duplex pair and waits for cat's echo of it;
// no exit frame may come first.
func (w *fakeWire) echo(route, sid, text string) {
	w.t.Helper()
	before := w.ok("duplexChannelWrite", map[string]any{"hostRouteId": route, "workerSessionId": sid,
		"data": base64.StdEncoding.EncodeToString([]byte(text))}, nil)
	var got strings.Builder
	for _, m := range before {
		w.frame(m, &got)
	}
	for !strings.Contains(got.String(), text) {
		w.frame(w.c.Next(), &got)
	}
}

func (w *fakeWire) frame(m rpctest.Msg, got *strings.Builder) {
	w.t.Helper()
	switch m.Method {
	case "duplexChannel.exit":
		w.t.Fatalf("the channel exited: %s", m.Raw)
	case "duplexChannel.data":
		var f struct{ Chunk []byte }
		if err := json.Unmarshal(m.Params, &f); err != nil {
			w.t.Fatalf("frame %s: %v", m.Raw, err)
		}
		got.Write(f.Chunk)
	}
}

func TestRefusedLeaseCallLeavesOtherEnvironmentsSessions(t *testing.T) {
	for _, method := range []string{"environmentReleaseLease", "environmentResumeLease", "environmentDestroyLease"} {
		t.Run(method, func(t *testing.T) {
			w := serveFake(t)
			var lease struct {
				ProviderLeaseID string
				Metadata        map[string]any
			}
			w.ok("environmentAcquireLease", map[string]any{"driverKey": fake.Key, "companyId": "co", "environmentId": "env-a",
				"config": map[string]any{}, "runId": "run-a"}, &lease)
			route := "duplex-route-1"
			var opened struct{ WorkerSessionID string }
			w.ok("duplexChannelOpen", map[string]any{"hostRouteId": route, "driverKey": fake.Key, "companyId": "co",
				"environmentId": "env-a", "providerLeaseId": lease.ProviderLeaseID, "command": []string{"cat"}}, &opened)
			w.echo(route, opened.WorkerSessionID, "before")

			reply, before := w.call(method, map[string]any{"driverKey": fake.Key, "companyId": "co", "environmentId": "env-b",
				"config": map[string]any{}, "providerLeaseId": lease.ProviderLeaseID, "leaseMetadata": lease.Metadata})
			if reply.Error == nil || !strings.Contains(reply.Error.Message, "belongs to another company or environment") {
				t.Fatalf("%s for environment B naming A's lease: %s, want the ownership refusal", method, reply.Raw)
			}
			var got strings.Builder
			for _, m := range before {
				w.frame(m, &got)
			}
			w.echo(route, opened.WorkerSessionID, "after")
		})
	}
}

// TestOrphanDestroyStillEndsTheLeasesSessionsFirst: the host's orphan
// destroy (environmentId "") names the lease's environment through the
// driver, so the lease's sessions still end before the lease does.
func TestOrphanDestroyStillEndsTheLeasesSessionsFirst(t *testing.T) {
	w := serveFake(t)
	var lease struct{ ProviderLeaseID string }
	w.ok("environmentAcquireLease", map[string]any{"driverKey": fake.Key, "companyId": "co", "environmentId": "env-a",
		"config": map[string]any{}, "runId": "run-a"}, &lease)
	var opened struct{ WorkerSessionID string }
	w.ok("duplexChannelOpen", map[string]any{"hostRouteId": "duplex-route-1", "driverKey": fake.Key, "companyId": "co",
		"environmentId": "env-a", "providerLeaseId": lease.ProviderLeaseID, "command": []string{"cat"}}, &opened)
	before := w.ok("environmentDestroyLease", map[string]any{"driverKey": fake.Key, "companyId": "co", "environmentId": "",
		"config": map[string]any{}, "providerLeaseId": lease.ProviderLeaseID}, nil)
	exited := false
	for _, m := range before {
		exited = exited || m.Method == "duplexChannel.exit"
	}
	if !exited {
		t.Fatalf("the orphan destroy answered before the session's exit (%d line(s) before it)", len(before))
	}
}
