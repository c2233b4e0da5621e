// Command demo plays a JSONL request script against sandbox-plugin and
// prints every request, reply and notification: `make demo` runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

func main() {
	bin := flag.String("bin", "bin/sandbox-plugin", "the sandbox-plugin binary")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: demo [-bin path] script.jsonl")
		os.Exit(2)
	}
	os.Exit(run(*bin, flag.Arg(0)))
}

func run(bin, path string) int {
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	host, err := stageHost()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer os.RemoveAll(host)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--log-level", "info")
	cmd.Env = []string{"TMPDIR=" + os.TempDir()}
	s, err := rpctest.StartPeer(cmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	vars := map[string]string{"host": host}
	showTraffic(s)
	runErr := s.Play(ctx, src, vars)
	_ = s.CloseInput()
	_, exitErr := s.Wait(ctx)
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "demo:", runErr)
		return 1
	}
	if exitErr != nil {
		fmt.Fprintln(os.Stderr, "demo: worker exit:", exitErr)
		return 1
	}
	if root := vars["fakeRootDir"]; root != "" {
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "demo: the lease root %s is still on disk\n", root)
			return 1
		}
	}
	out, err := os.ReadFile(filepath.Join(host, "result.txt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: sync out did not bring result.txt back:", err)
		return 1
	}
	fmt.Printf("\nsynced back to the host: result.txt = %q\nworker exited 0; the lease root is gone from disk.\n", out)
	return 0
}

// showTraffic prints every line p sends (→) and sees: a reply (←) or a
// notification (⇠ and its method).
func showTraffic(p *rpctest.Peer) {
	p.Sent = func(line []byte) { fmt.Printf("\n→ %s\n", clip(line)) }
	p.Seen = func(line []byte) {
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(line, &m)
		arrow := "←"
		if m.Method != "" {
			arrow = "  ⇠ " + m.Method + ":"
		}
		fmt.Printf("%s %s\n", arrow, clip(line))
	}
}

// stageHost makes the "host" side: a temporary directory with a small
// project for sync in.
func stageHost() (string, error) {
	host, err := os.MkdirTemp("", "sandbox-plugin-demo-")
	if err != nil {
		return "", err
	}
	files := []struct {
		path, text string
		mode       os.FileMode
	}{
		{"project/README.md", "# demo project\n", 0o644},
		{"project/src/main.sh", "#!/bin/sh\necho \"hello from the sandbox: $(pwd)\"\n", 0o755},
	}
	for _, f := range files {
		p := filepath.Join(host, f.path)
		if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, []byte(f.text), f.mode)
		}
		if err != nil {
			os.RemoveAll(host)
			return "", err
		}
	}
	return host, nil
}

func clip(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 600 {
		return string(b[:600]) + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return string(b)
}
