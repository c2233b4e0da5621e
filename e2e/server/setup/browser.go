package setup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// The operator's path through the Paperclip web UI: browser/flow.mjs, run
// by the server's Node with playwright-core (pinned by
// browser/package-lock.json) driving Debian's Chromium, never a browser
// download. A missing Chromium fails the run: the flow is never skipped.
// Each scene is one run of flow.mjs; its screenshots go to
// out/server-e2e/browser/.

// browserFlow is the installed flow and where it puts its screenshots.
type browserFlow struct {
	dir   string // the install: node_modules/playwright-core and flow.mjs
	shots string
}

// startBrowser checks for Chromium, installs playwright-core (when its
// lockfile changed) and puts flow.mjs beside it.
func (h *Env) StartBrowser(ctx context.Context) error {
	if _, err := os.Stat(h.Opts.Chromium); err != nil {
		return fmt.Errorf("no Chromium at %s: install Debian's chromium package (apt-get install chromium; make setup, the first step of make test, does), or pass -chromium; the browser flow is part of make server-e2e and is never skipped", h.Opts.Chromium)
	}
	dir := filepath.Join(h.Opts.CacheDir, "browser-npm") // not outDir/browser: that is the screenshots, emptied each run
	if err := paperclip.InstallLocked(ctx, h.Opts.BrowserNpm, dir, filepath.Join(h.LogDir, "npm-ci-browser.log"), "node_modules/playwright-core/package.json"); err != nil {
		return err
	}
	flow, err := os.ReadFile(filepath.Join(h.Opts.BrowserNpm, "flow.mjs"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "flow.mjs"), flow, 0o644); err != nil {
		return err
	}
	shots := filepath.Join(h.Opts.OutDir, "browser")
	if err := os.RemoveAll(shots); err != nil {
		return err
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		return err
	}
	h.browser = &browserFlow{dir: dir, shots: shots}
	return nil
}

// sceneStep is one line flow.mjs prints: a step, or (step "done") the end.
type sceneStep struct {
	Step  string `json:"step"`
	Saw   string `json:"saw"`
	Shot  string `json:"shot"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	URL   string `json:"url"`
	Page  string `json:"page"`
}

// scene runs one scene of flow.mjs with args and decodes its last line
// into out (when non-nil). Every step is printed; a failed scene is an
// error naming what the page showed and its screenshot.
func (h *Env) Scene(ctx context.Context, name string, args map[string]any, out any) error {
	args["scene"], args["base"], args["chromium"], args["shots"] = name, h.PC.APIBase, h.Opts.Chromium, h.browser.shots
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Node(), filepath.Join(h.browser.dir, "flow.mjs"), string(raw))
	cmd.Dir = h.browser.dir
	cmd.Env = []string{"PATH=" + filepath.Dir(h.Node()) + ":/usr/bin:/bin", "HOME=" + filepath.Join(h.RunDir, "browser-home")}
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	_ = os.WriteFile(filepath.Join(h.LogDir, "browser-"+name+".log"), append(append(stdout.Bytes(), "--- stderr\n"...), stderr.Bytes()...), 0o644)
	last, err := h.printScene(stdout.Bytes())
	if err != nil {
		return fmt.Errorf("browser scene %s: %w (exit: %v; stderr: %s)", name, err, runErr, jsonhttp.Truncate(stderr.String(), 800))
	}
	if !last.OK {
		return fmt.Errorf("browser scene %s: %s at %s; screenshot %s; the page showed: %s", name, last.Error, last.URL,
			filepath.Join(h.browser.shots, last.Shot), jsonhttp.Truncate(last.Page, 1500))
	}
	if out != nil {
		return json.Unmarshal(lastLine(stdout.Bytes()), out)
	}
	return nil
}

// printScene prints each step of a scene's stdout and returns its last
// line.
func (h *Env) printScene(stdout []byte) (sceneStep, error) {
	var last sceneStep
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		var s sceneStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return last, fmt.Errorf("flow.mjs printed a line that is not a step: %s", jsonhttp.Truncate(sc.Text(), 300))
		}
		if s.Step != "done" {
			fmt.Printf("   browser: %s (%s)\n", s.Saw, s.Shot)
		}
		last, seen = s, true
	}
	if !seen || last.Step != "done" {
		return last, errors.New("flow.mjs ended without its last line")
	}
	return last, nil
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

// browserInstall installs the plugin by its npm name through Plugin
// Manager's Install Plugin dialog, as an operator does.
func (h *Env) browserInstall(ctx context.Context) error {
	if err := h.StartBrowser(ctx); err != nil {
		return err
	}
	return h.Scene(ctx, "install", map[string]any{"package": registry.MainPackage, "pluginName": handlers.PluginDisplayName}, nil)
}
