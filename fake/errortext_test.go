package fake

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// An internal failure reaches the host as the fixed message: the OS error
// and our temp directory stay in the worker's log.
func TestInternalErrorTextStaysInTheWorker(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	d := New(WithTempDir(missing))
	defer d.Close(context.Background())
	c := serve(t, d)
	bp := handlers.BaseParams{DriverKey: "fake-plugin", CompanyID: "c", EnvironmentID: "e", Config: handlers.Object{}}
	_, err := callRPC[handlers.Lease](context.Background(), c, "environmentAcquireLease", &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "r"}, nil)
	if err == nil {
		t.Fatal("acquire under a missing temp dir succeeded")
	}
	if rpctest.Message(err) != rpc.InternalMessage || strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %q, want the fixed internal message", err)
	}
}
