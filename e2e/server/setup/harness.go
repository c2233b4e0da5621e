package setup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/model"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/proc"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// Options is what a run is given: its inputs, where it writes, and the
// set-up's profile (Faults).
type Options struct {
	ReleaseDir  string // make release's out/release: the tarballs
	RegistryNpm string // package.json + package-lock.json of the registry (verdaccio)
	Sim         string // bin/createos-sim
	Recorder    string // the traffic recorder binary
	NpmDir      string // package.json + package-lock.json of the server install
	BrowserNpm  string // package.json + package-lock.json of playwright-core, and flow.mjs
	Chromium    string // the system Chromium the browser flow drives
	OutDir      string // logs, the server install when it can live there, traces
	CacheDir    string // the server's and the registry's installs; default OutDir
	Fixtures    string // where Update writes the recorded heartbeat traffic
	Update      bool
	Timeout     time.Duration

	// Faults is the set-up of make chaos's scenarios: a sim with no rate
	// limit, the fault tools in every sandbox (chaos_stub.go), the
	// plugin installed with the CLI (no browser).
	Faults       bool
	ChaosCleanup time.Duration // how long the host's cleanup of a faulted run may take
}

// Env is the shared set-up every scenario runs on: the registry the
// plugin was installed from, the sims, the server and its client, the
// installed plugin and its worker's traces, the fake-plugin and createos
// environments, and the company and agent of the instance. It owns what
// it starts and creates; Close stops it.
type Env struct {
	Opts       Options
	Root       bool // the harness runs as root (the server as nobody)
	LogDir     string
	RunDir     string // temp: server home and data, staged plugin, sim sandboxes, stub agent
	InstallDir string
	tmpInstall bool // InstallDir is per-run (root, and out/ unreachable by the server user)

	LeaseRootsBefore map[string]bool
	made             []madeRecord // what the server's user may make outside the run directory, as it was before the run (stores.go)
	Sim              *proc.Proc
	Srv              *paperclip.Server
	PC               *paperclip.Client // the server's client (Srv.PC), current across restarts
	registry         *registry.Registry
	PlatformDir      string // the installed platform package that holds the worker
	SimURL, SimKey   string
	SimAPI           simctl.Client // the sim's API, once it runs

	CompanyID, AgentID string
	PluginID           string
	EnvIDs             map[string]string // driverKey -> environment id

	Traffic map[string][]trace.Entry // flow name -> what the worker saw

	browser      *browserFlow  // the operator's path in the UI (browser.go), once installed
	Model        *model.Server // the scripted model the real agent CLI talks to (package model)
	SandboxToken string        // the value only the sandboxes have (realcli.go)

	settling map[string]bool // lease ids make chaos leaves to the host's cleanup until its end
}

// PluginKey is our plugin's key.
const PluginKey = "paperclip.go-sandbox-provider"

// New prepares a run: its log and run directories; nothing is started.
func New(o Options) (*Env, error) {
	if o.CacheDir == "" {
		o.CacheDir = o.OutDir
	}
	if err := absAll(&o.CacheDir, &o.ReleaseDir, &o.RegistryNpm, &o.Sim, &o.Recorder, &o.NpmDir, &o.BrowserNpm, &o.OutDir, &o.Fixtures); err != nil {
		return nil, err
	}
	h := &Env{Opts: o, Root: os.Geteuid() == 0, LogDir: filepath.Join(o.OutDir, "logs"), EnvIDs: map[string]string{}, Traffic: map[string][]trace.Entry{}}
	h.made = recordMade(h.WorkerUID())
	if err := os.RemoveAll(h.LogDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.LogDir, 0o755); err != nil {
		return nil, err
	}
	if err := proc.BecomeSubreaper(); err != nil {
		return nil, fmt.Errorf("become a child subreaper (needed to find leftovers): %w", err)
	}
	dir, err := os.MkdirTemp("", "sandbox-plugin-server-e2e-")
	if err != nil {
		return nil, err
	}
	h.RunDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return h, err
	}
	h.InstallDir = filepath.Join(o.CacheDir, "npm")
	if h.Root && !paperclip.ReachableBy(o.CacheDir) {
		// The server user cannot reach out/ (a clone under a mode-700
		// home): install for this run only, where it can.
		h.InstallDir, h.tmpInstall = filepath.Join(dir, "npm"), true
	}
	h.LeaseRootsBefore = h.LeaseRoots()
	h.SimKey = "sim-" + RandomHex(16)
	h.Srv = &paperclip.Server{InstallDir: h.InstallDir, RunDir: dir, LogDir: h.LogDir, AsNobody: h.Root, AgentKey: "sk-ant-e2e-" + RandomHex(16)}
	return h, nil
}

// Node is the server install's Node 24.
func (h *Env) Node() string { return h.Srv.Node() }

// DataDir is the instance's data directory.
func (h *Env) DataDir() string { return h.Srv.DataDir() }

// RandomHex is n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func absAll(paths ...*string) error {
	for _, p := range paths {
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}

// namedStep is one step of a run.
type namedStep struct {
	name string
	f    func(context.Context) error
}

// Up brings the set-up up, step by step (SetupSteps); an error names the
// step.
func (h *Env) Up(ctx context.Context) error {
	return runSteps(ctx, h.setupSteps())
}

// Down ends a run after its scenarios (endSteps): everything stopped and
// checked, nothing left behind, the traffic written.
func (h *Env) Down(ctx context.Context) error {
	return runSteps(ctx, h.endSteps())
}

func runSteps(ctx context.Context, steps []namedStep) error {
	for _, s := range steps {
		if err := step(s.name, func() error { return s.f(ctx) }); err != nil {
			return err
		}
	}
	return nil
}

// step runs one named part of the run and prints how long it took.
func step(name string, f func() error) error {
	t := time.Now()
	fmt.Printf("== %s\n", name)
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Printf("   %s done in %s\n", name, time.Since(t).Round(10*time.Millisecond))
	return nil
}

// setupSteps bring a run up to a server with the plugin installed and the
// fake-plugin and createos environments created.
func (h *Env) setupSteps() []namedStep {
	return []namedStep{
		{"install the Paperclip server (" + paperclip.VersionLabel(h.Opts.NpmDir) + ", Node 24)", func(ctx context.Context) error {
			return paperclip.Install(ctx, h.Opts.NpmDir, h.InstallDir, h.LogDir)
		}},
		{"prepare the run directory (server home, data, stub agent)", h.prepareRun},
		{"start verdaccio on loopback and publish the release to it", h.startRegistry},
		{"start createos-sim", h.startSim},
		{"start the Paperclip server (test-drive; onboard where the release has none)", h.StartServer},
		{"install the plugin by name from the registry (Plugin Manager in the browser; make chaos: plugin install), then plugin list/inspect/health", h.installPlugin},
		{"put the traffic recorder in front of the installed worker (plugin disable, enable)", h.interposeRecorder},
		{"create and probe the fake-plugin and createos environments", h.createEnvironments},
	}
}

// endSteps end a run after its scenarios: everything stopped and nothing
// left behind, then the recorded traffic written.
func (h *Env) endSteps() []namedStep {
	return []namedStep{
		{"stop the server and the sim; nothing left behind", h.stopAndCheck},
		{"recorded host traffic", h.writeTraffic},
	}
}

// broken says why the shared set-up cannot run another scenario: the
// run's time is up, or the server or the sim is gone.
func (h *Env) Broken(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for name, p := range map[string]*proc.Proc{"the Paperclip server": h.Srv.Proc, "createos-sim": h.Sim} {
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited (%v); see %s", name, p.Err(), p.LogName())
		default:
		}
	}
	return nil
}

// close stops whatever is still running, removes what the run made
// outside the run directory (the worker's sync store, the server's Node
// compile cache) and removes the run directory.
func (h *Env) Close() error {
	var errs []error
	if err := h.registry.Stop(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range []*proc.Proc{h.Srv.Proc, h.Sim} {
		if p != nil {
			p.Stop(10 * time.Second)
		}
	}
	if err := h.Model.Close(); err != nil {
		errs = append(errs, fmt.Errorf("the scripted model: %w", err))
	}
	if left := procfs.Descendants(os.Getpid()); len(left) > 0 {
		proc.KillDescendants()
		errs = append(errs, fmt.Errorf("killed %d leftover processes", len(left)))
	}
	proc.ReapOrphans()
	if err := h.removeMade(); err != nil {
		errs = append(errs, err)
	}
	if h.RunDir != "" {
		// Keep the server's own logs and the raw worker traces with ours.
		_ = os.CopyFS(filepath.Join(h.LogDir, "paperclip-instance-logs"), os.DirFS(filepath.Join(h.DataDir(), "instances", "default", "logs")))
		if h.PlatformDir != "" {
			_ = os.CopyFS(filepath.Join(h.LogDir, "worker-traces"), os.DirFS(h.TraceDir()))
		}
		if err := os.RemoveAll(h.RunDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prepareRun makes the server user's home and data directories and the
// stub agent CLI. The home's .npmrc points npm at the run's registry
// (startRegistry).
func (h *Env) prepareRun(ctx context.Context) error {
	for _, d := range []string{"home", "data"} {
		if err := h.Srv.Mkdir(filepath.Join(h.RunDir, d)); err != nil {
			return err
		}
	}
	tools := filepath.Join(h.RunDir, "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		return err
	}
	stub := StubAgent
	if h.Opts.Faults {
		stub = ChaosStubAgent
		if err := os.MkdirAll(filepath.Join(tools, ChaosBinDir), 0o755); err != nil {
			return err
		}
		for name, script := range map[string]string{"chaos-hold": ChaosHold, "tar": ChaosTar} {
			if err := os.WriteFile(filepath.Join(tools, ChaosBinDir, name), []byte(script), 0o755); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tools, "claude"), []byte(stub), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tools, FailingStub), []byte(StubFailingAgent), 0o755); err != nil {
		return err
	}
	if err := h.prepareRealCLI(); err != nil {
		return err
	}
	m, err := model.Start(h.LogDir)
	if err != nil {
		return err
	}
	h.Model = m
	return nil
}

// SimRateLimit is the limit createos-sim enforces in make server-e2e and
// on the storm rows' accounts of make chaos: the provider's documented 300
// requests a minute, counted in a sliding window.
const SimRateLimit = "window:300/60s"

// startSim starts the run's createos-sim. Chaos restarts workers; a fresh
// worker does not know what the one it replaces spent, and a full window
// would refuse what it starts at once for up to a minute: the chaos rows
// are about crashes, and only its storm rows' accounts are limited.
func (h *Env) startSim(ctx context.Context) error {
	limit := SimRateLimit
	if h.Opts.Faults {
		limit = ""
	}
	p, url, err := h.LaunchSim("createos-sim", filepath.Join(h.RunDir, "sim"), limit)
	if err != nil {
		return err
	}
	h.Sim = p
	h.SimURL = url
	h.SimAPI = simctl.Client{URL: h.SimURL, Key: h.SimKey}
	fmt.Println("   createos-sim at", h.SimURL)
	return nil
}

// launchSim starts a createos-sim named name in simDir, with the run's
// key, mounts and PATH and the rate limit limit ("" for none), and returns
// it with its URL.
func (h *Env) LaunchSim(name, simDir, limit string) (*proc.Proc, string, error) {
	if err := os.MkdirAll(simDir, 0o755); err != nil {
		return nil, "", err
	}
	args := []string{"--listen", "127.0.0.1:0", "--api-key", h.SimKey, "--dir", simDir,
		"--mount", filepath.Join(h.RunDir, "tools") + ":" + SimToolsDir,
		"--mount", filepath.Dir(h.Node()) + ":" + SimNodeDir,
		"--mount", h.ClaudeDir() + ":" + SimClaudeDir, "--mount", h.SandboxOnlyDir() + ":" + SimSandboxDir,
		"--control", "-v"}
	if limit != "" {
		args = append(args, "--rate-limit", limit)
	}
	if h.Opts.Faults {
		args = append(args, "--path", SimToolsDir+"/"+ChaosBinDir) // first: the chaos tar (chaos_stub.go)
	}
	cmd := exec.Command(h.Opts.Sim, append(args, "--path", SimNodeDir, "--path", SimClaudeDir)...)
	p, err := proc.Start(name, h.LogDir, cmd)
	if err != nil {
		return nil, "", err
	}
	line, err := p.WaitLine(30*time.Second, "its URL on stdout", func(s string) bool { return strings.HasPrefix(s, "http://127.0.0.1:") })
	if err != nil {
		p.Stop(10 * time.Second)
		return nil, "", err
	}
	return p, strings.TrimSpace(line), nil
}

// StartServer starts the server (again, for a restart) and reads its
// company and agent.
func (h *Env) StartServer(ctx context.Context) error {
	if err := h.Srv.Start(ctx); err != nil {
		return err
	}
	h.PC, h.CompanyID, h.AgentID = h.Srv.PC, h.Srv.CompanyID, h.Srv.AgentID
	return nil
}
