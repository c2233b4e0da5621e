package setup

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// The plugin is installed the way an operator installs it: by name
// (paperclipai plugin install paperclip-plugin-go-sandbox), the server's
// npm resolving it from the run's registry (startRegistry), into the
// server user's plugin directory.

// PlatformPackage is the platform package npm must pick on this machine:
// Node's process.platform and process.arch of the server.
func PlatformPackage() string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	return registry.PlatformPrefix + runtime.GOOS + "-" + arch
}

// startRegistry installs verdaccio (when its lockfile changed), starts it
// on a free loopback port, creates the publishing user and publishes every
// tarball of the release to it.
func (h *Env) startRegistry(ctx context.Context) error {
	installDir := filepath.Join(h.Opts.CacheDir, "registry")
	if err := paperclip.InstallLocked(ctx, h.Opts.RegistryNpm, installDir, filepath.Join(h.LogDir, "npm-ci-registry.log"), registry.Script); err != nil {
		return err
	}
	r, err := registry.Start(h.Node(), installDir, filepath.Join(h.RunDir, "registry"), h.LogDir)
	h.registry = r // stopped by close even when it did not come up
	if err != nil {
		return err
	}
	fmt.Println("   verdaccio at", r.URL)
	if err := r.Login(ctx); err != nil {
		return err
	}
	tarballs, err := r.Publish(ctx, h.Opts.ReleaseDir, h.LogDir)
	if err != nil {
		return err
	}
	fmt.Printf("   published %d tarballs of %s\n", len(tarballs), h.Opts.ReleaseDir)
	// The server's npm installs from it: its user's ~/.npmrc, as an
	// operator with a private registry would have it.
	return os.WriteFile(filepath.Join(h.RunDir, "home", ".npmrc"), []byte("registry="+r.URL+"\n"), 0o644)
}

// pluginDir is where the server installs npm plugins: ~/.paperclip/plugins
// of the server user (DEFAULT_LOCAL_PLUGIN_DIR of the host's loader).
func (h *Env) PluginDir() string { return filepath.Join(h.RunDir, "home", ".paperclip", "plugins") }

// installPlugin installs the plugin by name: through Plugin Manager in a
// browser (browser.go), as an operator does; make chaos, which has no
// browser step, with the CLI. Then the CLI's list, inspect and health.
func (h *Env) installPlugin(ctx context.Context) error {
	mark := h.registry.Mark()
	if h.Opts.Faults {
		if _, err := h.PC.Run(ctx, 3*time.Minute, "plugin", "install", registry.MainPackage); err != nil {
			return err
		}
	} else if err := h.browserInstall(ctx); err != nil {
		return err
	}
	if err := h.inspectPlugin(ctx); err != nil {
		return err
	}
	if err := h.WaitHealthy(ctx); err != nil {
		return err
	}
	if err := h.checkInstalled(ctx, mark); err != nil {
		return err
	}
	return h.registry.Stop()
}

// inspectPlugin finds the plugin in plugin list and checks its drivers in
// plugin inspect.
func (h *Env) inspectPlugin(ctx context.Context) error {
	var list []struct {
		ID        string `json:"id"`
		PluginKey string `json:"pluginKey"`
		Status    string `json:"status"`
	}
	if err := h.PC.RunJSON(ctx, &list, "plugin", "list"); err != nil {
		return err
	}
	for _, p := range list {
		if p.PluginKey == PluginKey {
			h.PluginID = p.ID
		}
	}
	if h.PluginID == "" {
		return fmt.Errorf("plugin list does not show %s", PluginKey)
	}
	var inspect struct {
		PluginKey    string `json:"pluginKey"`
		ManifestJSON struct {
			EnvironmentDrivers []struct {
				DriverKey string `json:"driverKey"`
			} `json:"environmentDrivers"`
		} `json:"manifestJson"`
	}
	if err := h.PC.RunJSON(ctx, &inspect, "plugin", "inspect", PluginKey); err != nil {
		return err
	}
	var drivers []string
	for _, d := range inspect.ManifestJSON.EnvironmentDrivers {
		drivers = append(drivers, d.DriverKey)
	}
	if strings.Join(drivers, ",") != "fake-plugin,createos" {
		return fmt.Errorf("plugin inspect: environment drivers %v, want [fake-plugin createos]", drivers)
	}
	return nil
}

// checkInstalled checks what the install by name did: the registry
// served the main package and this platform's package and no other
// tarball (its log from line mark on), the plugin directory holds those
// two, and the worker the server runs is the platform package's binary.
func (h *Env) checkInstalled(ctx context.Context, mark int) error {
	want := []string{PlatformPackage(), registry.MainPackage}
	slices.Sort(want)
	if got := h.registry.Fetched(mark); !slices.Equal(got, want) {
		return fmt.Errorf("the install pulled %v from the registry, want %v", got, want)
	}
	modules := filepath.Join(h.PluginDir(), "node_modules")
	installed, err := InstalledPackages(modules)
	if err != nil {
		return err
	}
	if !slices.Equal(installed, want) {
		return fmt.Errorf("%s holds %v, want exactly %v", modules, installed, want)
	}
	h.PlatformDir = filepath.Join(modules, PlatformPackage())
	pid, err := h.waitWorker(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("   the registry served %s@%s and %s@%s, no other tarball; the worker (pid %d) runs %s\n",
		registry.MainPackage, PackageVersion(filepath.Join(modules, registry.MainPackage)), PlatformPackage(), PackageVersion(h.PlatformDir), pid, h.WorkerBinary())
	return nil
}

// InstalledPackages is the names of the plugin's packages in node_modules
// (the main package and platform packages), sorted.
func InstalledPackages(modules string) ([]string, error) {
	entries, err := os.ReadDir(modules)
	if err != nil {
		return nil, fmt.Errorf("the plugin directory after the install: %w", err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); n == registry.MainPackage || strings.HasPrefix(n, registry.PlatformPrefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func PackageVersion(dir string) string {
	var pkg struct {
		Version string `json:"version"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "package.json"))
	_ = json.Unmarshal(b, &pkg)
	return pkg.Version
}

// workerBinary is the worker binary of the installed platform package.
func (h *Env) WorkerBinary() string { return filepath.Join(h.PlatformDir, "bin", "sandbox-plugin") }

// WorkerPIDs is the processes of the run whose executable is path.
func WorkerPIDs(path string) []int {
	var out []int
	for _, p := range procfs.Descendants(os.Getpid()) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID)); err == nil && exe == path {
			out = append(out, p.PID)
		}
	}
	return out
}

// waitWorker waits for the worker the server started from the installed
// platform package, and returns its pid.
func (h *Env) waitWorker(ctx context.Context) (int, error) {
	bin, err := filepath.EvalSymlinks(h.WorkerBinary())
	if err != nil {
		return 0, fmt.Errorf("the installed platform package has no worker: %w", err)
	}
	var pid int
	err = wait.Poll(ctx, 30*time.Second, "a worker running "+bin, func() (bool, error) {
		pids := WorkerPIDs(bin)
		if len(pids) != 1 {
			return false, fmt.Errorf("%d processes run it", len(pids))
		}
		pid = pids[0]
		return true, nil
	})
	return pid, err
}

// interposeRecorder puts the traffic recorder (e2e/server/recorder) in
// front of the installed worker: plugin disable (the first worker exits),
// bin/sandbox-plugin of the platform package becomes sandbox-plugin.real
// with the recorder in its place, plugin enable (a new worker, through the
// recorder, answers initialize; health again). Every later worker is the
// installed binary, its JSON-RPC lines recorded in the package's trace/.
func (h *Env) interposeRecorder(ctx context.Context) error {
	bin, err := filepath.EvalSymlinks(h.WorkerBinary())
	if err != nil {
		return err
	}
	if _, err := h.PC.Run(ctx, 2*time.Minute, "plugin", "disable", PluginKey); err != nil {
		return err
	}
	if err := wait.Poll(ctx, 30*time.Second, "the first worker exited", func() (bool, error) { return len(WorkerPIDs(bin)) == 0, nil }); err != nil {
		return err
	}
	if err := os.Rename(bin, bin+".real"); err != nil {
		return err
	}
	recorder, err := os.ReadFile(h.Opts.Recorder)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bin, recorder, 0o755); err != nil {
		return err
	}
	if err := h.Srv.Mkdir(h.TraceDir()); err != nil {
		return err
	}
	if _, err := h.PC.Run(ctx, 2*time.Minute, "plugin", "enable", PluginKey); err != nil {
		return err
	}
	if err := h.WaitHealthy(ctx); err != nil {
		return err
	}
	return wait.Poll(ctx, 30*time.Second, "a worker started through the recorder answered initialize", func() (bool, error) {
		files := h.TraceFiles()
		return len(files) == 1 && trace.Answered(trace.Read(files[0]), "initialize"), nil
	})
}

func (h *Env) WaitHealthy(ctx context.Context) error {
	var last string
	return wait.Poll(ctx, time.Minute, "plugin health reports healthy", func() (bool, error) {
		var health struct {
			Status    string `json:"status"`
			Healthy   bool   `json:"healthy"`
			LastError string `json:"lastError"`
		}
		if err := h.PC.RunJSON(ctx, &health, "plugin", "health", h.PluginID); err != nil {
			return false, err
		}
		last = health.Status
		if health.LastError != "" {
			return false, fmt.Errorf("status %s, lastError %q", health.Status, health.LastError)
		}
		if !health.Healthy {
			return false, fmt.Errorf("status %s", last)
		}
		return true, nil
	})
}

// enableOurs enables our plugin again and waits until it is healthy and a
// new worker answered initialize.
func (h *Env) EnableOurs(ctx context.Context) error {
	before := len(h.TraceFiles())
	if _, err := h.PC.Run(ctx, 2*time.Minute, "plugin", "enable", PluginKey); err != nil {
		return err
	}
	if err := h.WaitHealthy(ctx); err != nil {
		return err
	}
	return wait.Poll(ctx, 30*time.Second, "a new worker of ours answered initialize", func() (bool, error) {
		files := h.TraceFiles()
		return len(files) > before && trace.Answered(trace.Read(files[len(files)-1]), "initialize"), nil
	})
}
