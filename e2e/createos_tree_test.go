package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

// A 64 MiB tree through the binary against createos-sim: syncIn of a
// directory (random bytes in files of several sizes, modes, a relative
// symlink, an empty directory), then syncOut of the same sandbox path to
// another host directory, byte-exact with modes and links; and the whole
// template cycle is covered by the driver's tests. The sim counts the
// requests per route; the transfer is 3 requests a mapping each way.
func TestCreateOSSixtyFourMiBTreeRoundTrip(t *testing.T) {
	s := startSim(t, "e2e-tree-key")
	w := startRPCWorker(t)
	cfg := map[string]any{"apiUrl": s.url, "apiKey": "e2e-tree-key", "shape": "s-1vcpu-1gb", "timeoutMs": 120000}
	with := func(extra map[string]any) map[string]any {
		p := map[string]any{"driverKey": "createos", "companyId": "company-e2e", "environmentId": "env-e2e", "config": cfg}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	w.Call(1, "initialize", map[string]any{"manifest": map[string]any{"id": "paperclip.go-sandbox-provider"}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "default", "hostVersion": "2026.916.1"}, "apiVersion": 1}, "", "company-e2e")
	reply, _ := w.Call(2, "environmentAcquireLease", with(map[string]any{"runId": "run-tree"}), "", "company-e2e")
	lease := result(t, "environmentAcquireLease", reply)
	leaseArg := map[string]any{"providerLeaseId": lease["providerLeaseId"], "metadata": lease["metadata"]}

	src := filepath.Join(t.TempDir(), "tree")
	files := map[string]struct {
		size int
		mode os.FileMode
	}{"big.bin": {40 << 20, 0o644}, "a/b/mid.bin": {16 << 20, 0o600}, "a/run.sh": {8<<20 - 3, 0o755}, "a/empty": {0, 0o640}}
	for name, f := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, f.size)
		_, _ = rand.Read(b)
		if err := os.WriteFile(p, b, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("b/mid.bin", filepath.Join(src, "a", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "void"), 0o700); err != nil {
		t.Fatal(err)
	}
	mapping := func(from, to string) map[string]any {
		return map[string]any{"operationId": "op", "files": []any{map[string]any{"sourcePath": from, "targetPath": to, "kind": "directory"}}}
	}
	reply, _ = w.Call(3, "environmentSyncIn", with(map[string]any{"lease": leaseArg, "operations": []any{mapping(src, "/paperclip-workspace/tree")}}), "", "company-e2e")
	result(t, "environmentSyncIn", reply)
	back := filepath.Join(t.TempDir(), "back")
	reply, _ = w.Call(4, "environmentSyncOut", with(map[string]any{"lease": leaseArg, "operations": []any{mapping("/paperclip-workspace/tree", back)}}), "", "company-e2e")
	result(t, "environmentSyncOut", reply)

	for name, f := range files {
		want, _ := os.ReadFile(filepath.Join(src, name))
		got, err := os.ReadFile(filepath.Join(back, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes back, want %d (%v)", name, len(got), len(want), err)
		}
		if st, err := os.Stat(filepath.Join(back, name)); err != nil || st.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v (%v)", name, st.Mode().Perm(), f.mode, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(back, "a", "link")); err != nil || l != "b/mid.bin" {
		t.Errorf("link %q %v", l, err)
	}
	if st, err := os.Stat(filepath.Join(back, "void")); err != nil || !st.IsDir() {
		t.Errorf("empty directory: %v", err)
	}
	reply, _ = w.Call(5, "environmentDestroyLease", with(map[string]any{"providerLeaseId": lease["providerLeaseId"], "leaseMetadata": lease["metadata"]}), "", "company-e2e")
	if reply.Error != nil {
		t.Fatalf("destroy %s", reply.Raw)
	}
	_, counts := s.get("/_control/counts")
	t.Logf("requests per route: %v", counts)
	_, left := s.get("/_control/sandboxes")
	if l, _ := left["sandboxes"].([]any); len(l) != 0 {
		t.Errorf("sandboxes left: %v", l)
	}
}
