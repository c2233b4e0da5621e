package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
		in, _ := cmd.StdinPipe()
		outPipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		out := bufio.NewReader(outPipe)
		io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"manifest":{},"config":{}}}`+"\n")
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,`) {
				break
			}
		}
		rssKiB = vmRSS(cmd.Process.Pid)
		io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"shutdown","params":{}}`+"\n")
		_, _ = io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
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
