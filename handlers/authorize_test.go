package handlers

import (
	"context"
	"slices"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions/sessionstest"
)

// guarded is a live driver that authorizes lease calls: it refuses with
// refuse, else names env as the lease's environment ("" for the call's).
// ran records the lease methods that ran.
type guarded struct {
	*live
	refuse error
	env    string
	asked  []LeaseCall
	ran    []string
}

func (g *guarded) record(method string) {
	g.mu.Lock()
	g.ran = append(g.ran, method)
	g.mu.Unlock()
}

func (g *guarded) ReleaseLease(ctx context.Context, p *ReleaseLeaseParams) (*TerminationReceipt, error) {
	g.record("environmentReleaseLease")
	return g.live.ReleaseLease(ctx, p)
}

func (g *guarded) ResumeLease(context.Context, *ResumeLeaseParams) (*Lease, error) {
	g.record("environmentResumeLease")
	return &Lease{}, nil
}

func (g *guarded) DestroyLease(ctx context.Context, p *DestroyLeaseParams) (*TerminationReceipt, error) {
	g.record("environmentDestroyLease")
	return g.live.DestroyLease(ctx, p)
}

func (g *guarded) AuthorizeLease(_ context.Context, c *LeaseCall) (string, error) {
	g.mu.Lock()
	g.asked = append(g.asked, *c)
	g.mu.Unlock()
	if g.refuse != nil {
		return "", g.refuse
	}
	if g.env != "" {
		return g.env, nil
	}
	return c.Base.EnvironmentID, nil
}

func serveGuarded(t *testing.T, g *guarded) *rpctest.Conn {
	t.Helper()
	p := New(Options{}, g)
	c, _ := rpctest.Serve(t, p, rpc.Options{})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return c
}

// TestRefusedLeaseCallEndsNothing: a lease call its driver refuses is
// answered with the refusal; the driver's method never runs and the
// lease's session stays open. An authorized call ends the sessions of the
// environment the driver names, and only those.
func TestRefusedLeaseCallEndsNothing(t *testing.T) {
	refusal := rpc.Errorf(rpc.CodeWorkerError, "lease-1 belongs to another environment.")
	cases := []struct {
		name   string
		method string
		refuse error
		env    string // the environment the driver names
		ends   bool
	}{
		{"release refused", "environmentReleaseLease", refusal, "", false},
		{"resume refused", "environmentResumeLease", refusal, "", false},
		{"destroy refused", "environmentDestroyLease", refusal, "", false},
		{"release authorized", "environmentReleaseLease", nil, "", true},
		{"orphan destroy of the route's environment", "environmentDestroyLease", nil, "env", true},
		{"authorized for another environment", "environmentReleaseLease", nil, "env-b", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &guarded{live: newLive(), refuse: tc.refuse, env: tc.env}
			c := serveGuarded(t, g)
			sessionstest.OpenDuplex(t, c, 1, "duplex-route-1", "cat")
			params := sessionstest.With(map[string]any{"config": map[string]any{}, "leaseMetadata": map[string]any{"k": "v"}})
			if tc.env == "env" {
				params["environmentId"] = ""
			}
			reply, before := c.Call(2, tc.method, params, "", "")
			if tc.refuse != nil {
				if reply.Error == nil || reply.Error.Message != "lease-1 belongs to another environment." {
					t.Fatalf("%s: %s, want the driver's refusal", tc.method, reply.Raw)
				}
			} else if reply.Error != nil {
				t.Fatalf("%s: %s", tc.method, reply.Raw)
			}
			g.mu.Lock()
			ran := slices.Clone(g.ran)
			g.mu.Unlock()
			want := []string{tc.method}
			if tc.refuse != nil {
				want = nil // a refused call runs none of the driver's lease methods
			}
			if !slices.Equal(ran, want) {
				t.Fatalf("the driver's lease methods that ran: %v; want %v", ran, want)
			}
			if len(g.asked) != 1 || g.asked[0].ProviderLeaseID != "lease-1" || g.asked[0].LeaseMetadata["k"] != "v" || g.asked[0].Base.CompanyID != "co" {
				t.Fatalf("the driver was asked %+v, want one call naming lease-1 of co with its metadata", g.asked)
			}
			exited := len(before) == 1 && before[0].Method == "duplexChannel.exit"
			if exited != tc.ends || g.Chan(0).IsClosed() != tc.ends {
				t.Fatalf("lines before the reply %v, channel closed %v; want the session ended: %v", before, g.Chan(0).IsClosed(), tc.ends)
			}
		})
	}
}
