package main

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

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// The plugin is installed the way an operator installs it: by name
// (paperclipai plugin install paperclip-plugin-go-sandbox), the server's
// npm resolving it from the run's registry (startRegistry), into the
// server user's plugin directory.

// platformPackage is the platform package npm must pick on this machine:
// Node's process.platform and process.arch of the server.
func platformPackage() string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	return registry.PlatformPrefix + runtime.GOOS + "-" + arch
}

// startRegistry installs verdaccio (when its lockfile changed), starts it
// on a free loopback port, creates the publishing user and publishes every
// tarball of the release to it.
func (h *harness) startRegistry(ctx context.Context) error {
	installDir := filepath.Join(h.o.cacheDir, "registry")
	if err := installLocked(ctx, h.o.registryNpm, installDir, filepath.Join(h.logDir, "npm-ci-registry.log"), registry.Script); err != nil {
		return err
	}
	r, err := registry.Start(h.node(), installDir, filepath.Join(h.runDir, "registry"), h.logDir)
	h.registry = r // stopped by close even when it did not come up
	if err != nil {
		return err
	}
	fmt.Println("   verdaccio at", r.URL)
	if err := r.Login(ctx); err != nil {
		return err
	}
	tarballs, err := r.Publish(ctx, h.o.releaseDir, h.logDir)
	if err != nil {
		return err
	}
	fmt.Printf("   published %d tarballs of %s\n", len(tarballs), h.o.releaseDir)
	// The server's npm installs from it: its user's ~/.npmrc, as an
	// operator with a private registry would have it.
	return os.WriteFile(filepath.Join(h.runDir, "home", ".npmrc"), []byte("registry="+r.URL+"\n"), 0o644)
}

// pluginDir is where the server installs npm plugins: ~/.paperclip/plugins
// of the server user (DEFAULT_LOCAL_PLUGIN_DIR of the host's loader).
func (h *harness) pluginDir() string { return filepath.Join(h.runDir, "home", ".paperclip", "plugins") }

// installPlugin installs the plugin by name: through Plugin Manager in a
// browser (browser.go), as an operator does; make chaos, which has no
// browser step, with the CLI. Then the CLI's list, inspect and health.
func (h *harness) installPlugin(ctx context.Context) error {
	mark := h.registry.Mark()
	if h.o.chaos {
		if _, err := h.pc.run(ctx, 3*time.Minute, "plugin", "install", registry.MainPackage); err != nil {
			return err
		}
	} else if err := h.browserInstall(ctx); err != nil {
		return err
	}
	if err := h.inspectPlugin(ctx); err != nil {
		return err
	}
	if err := h.waitHealthy(ctx); err != nil {
		return err
	}
	if err := h.checkInstalled(ctx, mark); err != nil {
		return err
	}
	return h.registry.Stop()
}

// inspectPlugin finds the plugin in plugin list and checks its drivers in
// plugin inspect.
func (h *harness) inspectPlugin(ctx context.Context) error {
	var list []struct {
		ID        string `json:"id"`
		PluginKey string `json:"pluginKey"`
		Status    string `json:"status"`
	}
	if err := h.pc.runJSON(ctx, &list, "plugin", "list"); err != nil {
		return err
	}
	for _, p := range list {
		if p.PluginKey == pluginKey {
			h.pluginID = p.ID
		}
	}
	if h.pluginID == "" {
		return fmt.Errorf("plugin list does not show %s", pluginKey)
	}
	var inspect struct {
		PluginKey    string `json:"pluginKey"`
		ManifestJSON struct {
			EnvironmentDrivers []struct {
				DriverKey string `json:"driverKey"`
			} `json:"environmentDrivers"`
		} `json:"manifestJson"`
	}
	if err := h.pc.runJSON(ctx, &inspect, "plugin", "inspect", pluginKey); err != nil {
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
func (h *harness) checkInstalled(ctx context.Context, mark int) error {
	want := []string{platformPackage(), registry.MainPackage}
	slices.Sort(want)
	if got := h.registry.Fetched(mark); !slices.Equal(got, want) {
		return fmt.Errorf("the install pulled %v from the registry, want %v", got, want)
	}
	modules := filepath.Join(h.pluginDir(), "node_modules")
	installed, err := installedPackages(modules)
	if err != nil {
		return err
	}
	if !slices.Equal(installed, want) {
		return fmt.Errorf("%s holds %v, want exactly %v", modules, installed, want)
	}
	h.platformDir = filepath.Join(modules, platformPackage())
	pid, err := h.waitWorker(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("   the registry served %s@%s and %s@%s, no other tarball; the worker (pid %d) runs %s\n",
		registry.MainPackage, packageVersion(filepath.Join(modules, registry.MainPackage)), platformPackage(), packageVersion(h.platformDir), pid, h.workerBinary())
	return nil
}

// installedPackages is the names of the plugin's packages in node_modules
// (the main package and platform packages), sorted.
func installedPackages(modules string) ([]string, error) {
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

func packageVersion(dir string) string {
	var pkg struct {
		Version string `json:"version"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "package.json"))
	_ = json.Unmarshal(b, &pkg)
	return pkg.Version
}

// workerBinary is the worker binary of the installed platform package.
func (h *harness) workerBinary() string { return filepath.Join(h.platformDir, "bin", "sandbox-plugin") }

// workerPIDs is the processes of the run whose executable is path.
func workerPIDs(path string) []int {
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
func (h *harness) waitWorker(ctx context.Context) (int, error) {
	bin, err := filepath.EvalSymlinks(h.workerBinary())
	if err != nil {
		return 0, fmt.Errorf("the installed platform package has no worker: %w", err)
	}
	var pid int
	err = poll(ctx, 30*time.Second, "a worker running "+bin, func() (bool, error) {
		pids := workerPIDs(bin)
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
func (h *harness) interposeRecorder(ctx context.Context) error {
	bin, err := filepath.EvalSymlinks(h.workerBinary())
	if err != nil {
		return err
	}
	if _, err := h.pc.run(ctx, 2*time.Minute, "plugin", "disable", pluginKey); err != nil {
		return err
	}
	if err := poll(ctx, 30*time.Second, "the first worker exited", func() (bool, error) { return len(workerPIDs(bin)) == 0, nil }); err != nil {
		return err
	}
	if err := os.Rename(bin, bin+".real"); err != nil {
		return err
	}
	recorder, err := os.ReadFile(h.o.recorder)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bin, recorder, 0o755); err != nil {
		return err
	}
	if err := h.mkdirFor(h.traceDir()); err != nil {
		return err
	}
	if _, err := h.pc.run(ctx, 2*time.Minute, "plugin", "enable", pluginKey); err != nil {
		return err
	}
	if err := h.waitHealthy(ctx); err != nil {
		return err
	}
	return poll(ctx, 30*time.Second, "a worker started through the recorder answered initialize", func() (bool, error) {
		files := h.traceFiles()
		return len(files) == 1 && trace.Answered(trace.Read(files[0]), "initialize"), nil
	})
}

func (h *harness) waitHealthy(ctx context.Context) error {
	var last string
	return poll(ctx, time.Minute, "plugin health reports healthy", func() (bool, error) {
		var health struct {
			Status    string `json:"status"`
			Healthy   bool   `json:"healthy"`
			LastError string `json:"lastError"`
		}
		if err := h.pc.runJSON(ctx, &health, "plugin", "health", h.pluginID); err != nil {
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
