package fake

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// A command that moves its lease root away and puts a symlink to another
// directory at the root's name cannot redirect the worker: sync-in writes,
// sync-out reads, post-upload commands run in, and destroy removes the
// directory the lease was given, and the other directory is left as it was.
func TestRootSwappedForASymlinkLeadsNowhere(t *testing.T) {
	ctx := context.Background()
	e := newSyncEnv(t, nil)
	out := t.TempDir()
	syncWriteTree(t, out, map[string]string{"workspace/secret": "outside"})
	syncWriteTree(t, e.ws, map[string]string{"secret": "inside"})
	moved := e.root + ".m"
	r := execute(t, e.d, e.base, &e.lease, nil, "sh", "-c", `cd / && mv "$0" "$0.m" && ln -s "$1" "$0"`, e.root, out)
	if *r.ExitCode != 0 {
		t.Fatalf("swap = %+v", r)
	}
	if target, err := os.Readlink(e.root); err != nil || target != out {
		t.Fatalf("the root is not the planted symlink: %q, %v", target, err)
	}

	syncWriteTree(t, e.host, map[string]string{"pwned": "x"})
	in := syncOp("in", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "pwned"), TargetPath: e.ws + "/pwned", Kind: "file"})
	in.PostUploadCommands = []handlers.PostUploadCommand{{Command: "echo ran > ran", Cwd: e.ws}}
	if _, err := e.in(in); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(e.host, "back")
	if _, err := e.out(syncOp("out", handlers.SyncFileMapping{SourcePath: e.ws + "/secret", TargetPath: back, Kind: "file"})); err != nil {
		t.Fatal(err)
	}
	syncCheckFile(t, back, "inside")
	syncCheckFile(t, filepath.Join(moved, "workspace", "pwned"), "x")
	syncCheckFile(t, filepath.Join(moved, "workspace", "ran"), "ran\n")
	if got := syncReadTree(t, out); len(got) != 1 || got["workspace/secret"] != "outside" {
		t.Fatalf("the symlink's target changed: %v", got)
	}

	id := e.lease.LeaseID()
	rc, err := callRPC[handlers.TerminationReceipt](ctx, e.d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: e.base, ProviderLeaseID: &id}, nil)
	if !receiptIs(rc, err, "destroyed") {
		t.Fatalf("destroy = %+v, %v", rc, err)
	}
	for _, p := range []string{moved, e.root} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after destroy: %v", p, err)
		}
	}
	syncCheckFile(t, filepath.Join(out, "workspace", "secret"), "outside")
}
