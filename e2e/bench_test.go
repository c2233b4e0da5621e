package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// BenchmarkStartup measures starting the worker, initialize, and shutdown;
// it reports the idle resident memory after initialize.
func BenchmarkStartup(b *testing.B) {
	plain := filepath.Join(b.TempDir(), "sandbox-plugin")
	if out, err := exec.Command("go", "build", "-o", plain, "../cmd/sandbox-plugin").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	var rssKiB float64
	for b.Loop() {
		cmd := exec.Command(plain)
		p, err := rpctest.StartPeer(cmd)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), rpctest.Timeout)
		if err := p.Write(rpctest.Request(1, "initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{}}, "", "")); err != nil {
			b.Fatal(err)
		}
		if _, _, err := p.Await(ctx, json.RawMessage("1")); err != nil {
			b.Fatal(err)
		}
		rssKiB = vmRSS(cmd.Process.Pid)
		if err := p.Write(rpctest.Request(2, "shutdown", map[string]any{}, "", "")); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil { // the rest of the output, then how it exited
			b.Fatal(err)
		}
		cancel()
	}
	b.ReportMetric(rssKiB, "KiB-idle-rss")
}

func vmRSS(pid int) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}
