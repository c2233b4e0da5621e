package rpc_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// orderedDispatcher admits "put" on the reader, recording the order of
// arrival, and serves it on any goroutine after a delay that reverses the
// order in which the serving goroutines finish; "after" notifies from
// AfterReply.
type orderedDispatcher struct {
	mu       sync.Mutex
	admitted []int
}

func (d *orderedDispatcher) Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "after":
		n := rpc.NotifierFrom(ctx).Detached()
		ctx, cancel := context.WithCancel(ctx) // AfterReply finds the request below derived contexts
		defer cancel()
		rpc.AfterReply(ctx, func() { _ = n.Notify("after.reply", map[string]int{"n": 1}) })
		return "reply", nil
	}
	return nil, rpc.MethodNotFound(method)
}

func (d *orderedDispatcher) Admit(method string, params json.RawMessage) func(context.Context) (any, error) {
	if method != "put" {
		return nil
	}
	var p struct{ N int }
	_ = json.Unmarshal(params, &p)
	d.mu.Lock()
	d.admitted = append(d.admitted, p.N)
	d.mu.Unlock()
	return func(ctx context.Context) (any, error) {
		time.Sleep(time.Duration(20-p.N) * time.Millisecond)
		return p.N, nil
	}
}

func TestAdmitKeepsArrivalOrder(t *testing.T) {
	d := &orderedDispatcher{}
	c, _ := rpctest.Serve(t, d, rpc.Options{})
	for i := range 20 {
		c.Send(rpctest.Request(i, "put", map[string]int{"n": i}, "", ""))
	}
	for range 20 { // in any order: they are served concurrently
		reply := c.Next()
		var got int
		c.Result(reply, &got)
		if string(reply.ID) != strconv.Itoa(got) {
			t.Fatalf("reply %s = %d", reply.ID, got)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.admitted) != 20 {
		t.Fatalf("admitted %v, want 20 requests", d.admitted)
	}
	for i, n := range d.admitted {
		if n != i {
			t.Fatalf("admitted %v, want 0..19 in order", d.admitted)
		}
	}
}

func TestAfterReplyRunsOnceTheReplyIsWritten(t *testing.T) {
	c, _ := rpctest.Serve(t, &orderedDispatcher{}, rpc.Options{})
	for i := range 5 {
		c.Send(rpctest.Request(i, "after", nil, "", ""))
		reply, before := c.ReplyTo(i)
		if len(before) != 0 {
			t.Fatalf("call %d: %d line(s) before the reply: %v", i, len(before), before)
		}
		if reply.Error != nil {
			t.Fatalf("call %d: %v", i, reply.Error)
		}
		if m := c.Next(); m.Method != "after.reply" {
			t.Fatalf("call %d: after the reply got %+v, want after.reply", i, m)
		}
	}
}
