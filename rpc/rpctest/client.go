package rpctest

import (
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// Client serves d in-process over pipes, as Serve does, and returns an
// rpc.Client connected to it: typed calls, deadlines and notifications the
// way a Go host sees them. At cleanup the worker's stdin is closed (Kill,
// for a client that did not start the worker) and Serve must return.
func Client(t testing.TB, d rpc.Dispatcher, opts rpc.Options, copts rpc.ClientOptions) *rpc.Client {
	t.Helper()
	w := startInProcess(d, opts)
	c := rpc.NewClient(w.out, w.in, copts)
	t.Cleanup(func() {
		c.Kill()
		select {
		case err := <-w.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(Timeout):
			t.Errorf("Serve did not return %v after stdin closed", Timeout)
			w.out.Close()
		}
		<-c.Done()
	})
	return c
}
