// Package benchproc starts the processes a benchmark drives: a
// createos-sim of its own and a worker with the scrubbed environment the
// host gives plugin workers. bench/scale and bench/syncbench share it.
package benchproc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// Sim is a running createos-sim: its origin, its API key and its data
// directory (where its sandboxes live while it runs).
type Sim struct {
	Origin, Key, Dir string
}

// StartSim starts createos-sim (the binary at path) on a free port with a
// data directory of its own, its control API on and a fresh key named
// after name, and the extra flags; the test's cleanup stops it (stdin EOF,
// which deletes every sandbox, then SIGKILL after stopWait).
func StartSim(t testing.TB, path, name string, stopWait time.Duration, extra ...string) (*Sim, error) {
	return StartSimIn(t, t.TempDir(), path, name, stopWait, extra...)
}

// StartSimIn is StartSim with dir (empty, the caller's) as the sim's data
// directory and TMPDIR. Once the sim has exited, the cleanup fails the
// test for every sandbox directory it left there.
func StartSimIn(t testing.TB, dir, path, name string, stopWait time.Duration, extra ...string) (*Sim, error) {
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	s := &Sim{Key: name + "-" + hex.EncodeToString(nonce), Dir: dir}
	args := append([]string{"--listen", "127.0.0.1:0", "--api-key", s.Key, "--control", "--exit-on-stdin-eof", "--dir", dir}, extra...)
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"TMPDIR=" + dir}
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first, exited := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(exited)
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, r)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(stopWait):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("createos-sim did not exit on stdin EOF; stderr:\n%s", stderr.String())
		}
		if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
			t.Errorf("createos-sim left its data directory %s with %d entries (%v): its sandboxes are not all deleted", dir, len(left), err)
		}
	})
	select {
	case line := <-first:
		s.Origin = strings.TrimSpace(line)
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("createos-sim %s printed no URL in 20 s; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	if !strings.HasPrefix(s.Origin, "http://127.0.0.1:") {
		select { // its stderr is complete once it exited
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		return nil, fmt.Errorf("createos-sim %s did not start (first line %q); stderr:\n%s", strings.Join(args, " "), s.Origin, strings.TrimSpace(stderr.String()))
	}
	return s, nil
}

// StartWorker starts the worker binary at path with the scrubbed
// environment the host gives plugin workers (PATH, a TMPDIR of the test's,
// TZ) plus env, its notifications to notify, and initializes it; the
// test's cleanup kills it.
func StartWorker(t testing.TB, path string, env []string, notify func(method string, params json.RawMessage, invocationID string), callTimeout time.Duration) (*rpc.Client, error) {
	return StartWorkerIn(t, t.TempDir(), path, env, notify, callTimeout)
}

// StartWorkerIn is StartWorker with tmp (the caller's) as the worker's
// TMPDIR.
func StartWorkerIn(t testing.TB, tmp, path string, env []string, notify func(method string, params json.RawMessage, invocationID string), callTimeout time.Duration) (*rpc.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := rpc.StartClient(ctx, rpc.ClientOptions{
		Path:           path,
		Env:            append([]string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "TZ=UTC"}, env...),
		OnNotification: notify,
		CallTimeout:    callTimeout,
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(c.Kill)
	_, err = c.Initialize(ctx, map[string]any{
		"manifest": map[string]any{"id": "paperclip.go-sandbox-provider"}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "default", "hostVersion": "2026.916.1"}, "apiVersion": 1,
	})
	if err != nil {
		return nil, fmt.Errorf("initialize the worker: %v (stderr: %s)", err, c.Stderr())
	}
	return c, nil
}
