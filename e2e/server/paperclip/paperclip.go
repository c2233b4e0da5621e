package paperclip

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
)

// Client talks to one running server: its REST API for what the CLI
// has no command for, and the paperclipai CLI for what an operator would
// type.
type Client struct {
	APIBase string // http://127.0.0.1:<port>
	node    string // Node >= 24.11 for the CLI
	cli     string // paperclipai's dist/index.js
	env     []string
	logDir  string
	http    *http.Client
	nCLI    int
}

// API sends one JSON request and decodes the JSON answer into out (if
// non-nil). A status outside 2xx is an error carrying the body.
func (pc *Client) API(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := jsonhttp.NewRequest(ctx, method, pc.APIBase+"/api"+path, body)
	if err != nil {
		return err
	}
	resp, err := pc.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	pc.logAPI(method, path, resp.StatusCode, b)
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, jsonhttp.Truncate(string(b), 2000))
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode %s: %w", method, path, jsonhttp.Truncate(string(b), 500), err)
		}
	}
	return nil
}

// logAPI appends one exchange to logs/api.log.
func (pc *Client) logAPI(method, path string, status int, body []byte) {
	f, err := os.OpenFile(filepath.Join(pc.logDir, "api.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s -> %d %s\n", time.Now().Format(time.TimeOnly), method, path, status, jsonhttp.Truncate(string(body), 4000))
}

// Run runs `paperclipai <args> --api-base <server>`, keeping its output in
// logs/cli-<n>-<first arg>.log, and returns stdout.
func (pc *Client) Run(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pc.nCLI++
	name := fmt.Sprintf("cli-%02d-%s", pc.nCLI, strings.Join(args[:min(2, len(args))], "-"))
	full := append([]string{pc.cli}, args...)
	full = append(full, "--api-base", pc.APIBase)
	cmd := exec.CommandContext(ctx, pc.node, full...)
	cmd.Env = pc.env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	log := fmt.Sprintf("$ paperclipai %s\n--- stdout\n%s\n--- stderr\n%s\n--- %v\n", strings.Join(args, " "), stdout.String(), stderr.String(), err)
	_ = os.WriteFile(filepath.Join(pc.logDir, name+".log"), []byte(log), 0o644)
	if ctx.Err() != nil {
		return stdout.String(), fmt.Errorf("paperclipai %s: no answer within %s; see %s.log", strings.Join(args, " "), timeout, name)
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("paperclipai %s: %v: %s", strings.Join(args, " "), err, jsonhttp.Truncate(stderr.String()+stdout.String(), 2000))
	}
	return stdout.String(), nil
}

// RunJSON runs a CLI command with --json and decodes its stdout.
func (pc *Client) RunJSON(ctx context.Context, out any, args ...string) error {
	s, err := pc.Run(ctx, 2*time.Minute, append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		return fmt.Errorf("paperclipai %s --json: decode: %w: %s", strings.Join(args, " "), err, jsonhttp.Truncate(s, 500))
	}
	return nil
}
