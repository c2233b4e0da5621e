// Command floor is the benchmark floor for make bench-host: the least code
// a Go plugin worker needs to do the work the benchmark measures, with no
// validation, limits, cancellation or logging. It answers initialize,
// health and shutdown inline on the goroutine that reads stdin, and serves
// environmentAcquireLease, environmentReleaseLease and environmentExecute
// with fake-plugin semantics on a goroutine each: a lease is a temporary
// workspace directory; an execute spawns argv in its own process group with
// pipes, sends each read as an execute.log notification carrying the
// request's paperclipInvocationId, keeps a 16 MiB tail per stream and
// returns {exitCode, signal, timedOut, stdout, stderr}.
package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

type request struct {
	ID         json.RawMessage `json:"id"`
	Method     string          `json:"method"`
	Params     json.RawMessage `json:"params"`
	Invocation struct {
		ID string `json:"id"`
	} `json:"paperclipInvocation"`
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		var req request
		if len(line) > 0 && json.Unmarshal(line, &req) == nil && len(req.ID) > 0 {
			switch req.Method {
			case "environmentAcquireLease", "environmentReleaseLease", "environmentExecute":
				go func() { reply(req.ID, serve(req)) }()
			default:
				reply(req.ID, result(req.Method))
				if req.Method == "shutdown" {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func result(method string) json.RawMessage {
	switch method {
	case "initialize":
		return json.RawMessage(`{"ok":true,"supportedMethods":["health","shutdown","environmentAcquireLease","environmentReleaseLease","environmentExecute"]}`)
	case "health":
		// The same bytes as sandbox-plugin's health result, so both
		// workers hand the host a line of the same size to parse.
		return json.RawMessage(`{"status":"ok","message":"sandbox-plugin healthy: 2 driver(s), 0 request(s) in flight","details":{"drivers":["createos","fake-plugin"],"inFlight":0,"uptimeMs":0}}`)
	default:
		return json.RawMessage(`null`)
	}
}

var (
	stdout sync.Mutex // one line at a time on os.Stdout
	leases sync.Map   // providerLeaseId → workspace directory
)

func send(line []byte) {
	stdout.Lock()
	os.Stdout.Write(line)
	stdout.Unlock()
}

func reply(id json.RawMessage, result json.RawMessage) {
	line := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	line = append(append(append(line, `,"result":`...), result...), "}\n"...)
	send(line)
}

func serve(req request) json.RawMessage {
	var p struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		Lease           struct {
			ProviderLeaseID string `json:"providerLeaseId"`
		} `json:"lease"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Cwd     string            `json:"cwd"`
		Env     map[string]string `json:"env"`
		Stdin   *string           `json:"stdin"`
	}
	json.Unmarshal(req.Params, &p)
	var res any
	switch req.Method {
	case "environmentAcquireLease":
		dir, _ := os.MkdirTemp("", "bench-floor-")
		id := "floor://" + dir
		leases.Store(id, dir)
		res = map[string]any{"providerLeaseId": id, "metadata": map[string]any{"remoteCwd": dir}}
	case "environmentReleaseLease":
		if dir, ok := leases.LoadAndDelete(p.ProviderLeaseID); ok {
			os.RemoveAll(dir.(string))
		}
	case "environmentExecute":
		cwd := p.Cwd
		if cwd == "" {
			dir, _ := leases.Load(p.Lease.ProviderLeaseID)
			cwd, _ = dir.(string)
		}
		res = execute(req.Invocation.ID, p.Command, p.Args, cwd, p.Env, p.Stdin)
	}
	out, _ := json.Marshal(res)
	return out
}

type executeResult struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
	Stdout   string  `json:"stdout"`
	Stderr   string  `json:"stderr"`
}

func execute(invocation, command string, args []string, cwd string, env map[string]string, stdin *string) executeResult {
	cmd := exec.Command(command, args...)
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if stdin != nil {
		cmd.Stdin = strings.NewReader(*stdin)
	}
	outR, _ := cmd.StdoutPipe()
	errR, _ := cmd.StderrPipe()
	code := 127
	if err := cmd.Start(); err != nil {
		return executeResult{ExitCode: &code, Stderr: err.Error() + "\n"}
	}
	var outT, errT tail
	var wg sync.WaitGroup
	wg.Go(func() { stream(invocation, "stdout", outR.(*os.File), &outT) })
	wg.Go(func() { stream(invocation, "stderr", errR.(*os.File), &errT) })
	wg.Wait()
	cmd.Wait()
	res := executeResult{Stdout: outT.String(), Stderr: errT.String()}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		res.Signal = &name
	} else {
		code = ws.ExitStatus()
		res.ExitCode = &code
	}
	return res
}

// stream sends each read of r to the host and into t. The pipe gets the
// fake driver's size (growPipe) and the reads its buffer (256 KiB), so both
// workers hand the host the same number of notifications. A read is at
// most 256 KiB, below the host's 1,000,000-unit chunk limit.
func stream(invocation, name string, r *os.File, t *tail) {
	growPipe(r)
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.Write(buf[:n])
			chunk, _ := json.Marshal(string(buf[:n]))
			line := append([]byte(`{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"`+name+`","chunk":`), chunk...)
			line = append(line, `},"paperclipInvocationId":"`+invocation+"\"}\n"...)
			send(line)
		}
		if err != nil {
			return
		}
	}
}

// tail keeps the last tailMax bytes written in a ring.
type tail struct {
	buf   []byte
	start int
}

const tailMax = 16 << 20

func (t *tail) Write(p []byte) {
	if len(p) > tailMax {
		p = p[len(p)-tailMax:]
	}
	if room := tailMax - len(t.buf); room > 0 {
		k := min(room, len(p))
		t.buf, p = append(t.buf, p[:k]...), p[k:]
	}
	for len(p) > 0 {
		k := copy(t.buf[t.start:], p)
		p, t.start = p[k:], (t.start+k)%tailMax
	}
}

func (t *tail) String() string {
	b := make([]byte, 0, len(t.buf))
	return string(append(append(b, t.buf[t.start:]...), t.buf[:t.start]...))
}
