package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
)

// The second plugin that declares createos (samekey.go): a copy of our
// installed release under another plugin id, package name and display
// name, installed from a local directory as a plugin of its own. It runs
// our worker binary behind a recorder of its own, so its traffic is kept
// apart from ours (its trace/).
const (
	otherPluginKey   = "example.other-createos"
	otherPackage     = "example-other-createos"
	otherDisplayName = "Other CreateOS"
)

// otherPlugin is the staged copy: its package directory and, once
// installed, its database id.
type otherPlugin struct {
	dir, id string
}

func (o *otherPlugin) traceDir() string { return filepath.Join(o.dir, "trace") }

// realWorker is the copy's worker binary (the recorder stands in front of it).
func (o *otherPlugin) realWorker() string { return filepath.Join(o.dir, "bin", "sandbox-plugin.real") }

// stageOther writes the copy into the run directory: package.json with
// another name, the manifest of `plugin inspect` with another id and
// display name and only the createos driver, our shim (dist/worker.js,
// dist/locate.js), and a bundled bin/ (the shim looks there first): the
// platform package's worker.json, the real worker and the recorder.
func (h env) stageOther(ctx context.Context) (*otherPlugin, error) {
	o := &otherPlugin{dir: filepath.Join(h.RunDir, "other-createos")}
	main := filepath.Join(h.PluginDir(), "node_modules", registry.MainPackage)
	manifest, err := h.otherManifest(ctx)
	if err != nil {
		return nil, err
	}
	pkg := map[string]any{
		"name": otherPackage, "version": setup.PackageVersion(main), "type": "module",
		"description":     "A second plugin declaring the createos driver (make server-e2e).",
		"paperclipPlugin": map[string]string{"manifest": "./dist/manifest.js", "worker": "./dist/worker.js"},
	}
	pkgJSON, _ := json.MarshalIndent(pkg, "", "  ")
	manifestJSON, _ := json.MarshalIndent(manifest, "", "  ")
	files := map[string][]byte{
		"package.json":     pkgJSON,
		"dist/manifest.js": []byte("const manifest = " + string(manifestJSON) + ";\n\nexport default manifest;\n"),
	}
	copies := map[string]string{
		"dist/worker.js":          filepath.Join(main, "dist", "worker.js"),
		"dist/locate.js":          filepath.Join(main, "dist", "locate.js"),
		"bin/worker.json":         filepath.Join(h.PlatformDir, "bin", "worker.json"),
		"bin/sandbox-plugin.real": h.WorkerBinary() + ".real",
		"bin/sandbox-plugin":      h.Opts.Recorder,
	}
	for rel, src := range copies {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("stage the second plugin: %w", err)
		}
		files[rel] = b
	}
	for rel, b := range files {
		path := filepath.Join(o.dir, rel)
		mode := os.FileMode(0o644)
		if filepath.Dir(rel) == "bin" && rel != "bin/worker.json" {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b, mode); err != nil {
			return nil, err
		}
	}
	return o, h.Srv.Mkdir(o.traceDir())
}

// otherManifest is our installed manifest (plugin inspect) as the second
// plugin's: another id and display name, and only the createos driver,
// renamed.
func (h env) otherManifest(ctx context.Context) (map[string]any, error) {
	var inspect struct {
		ManifestJSON map[string]any `json:"manifestJson"`
	}
	if err := h.PC.RunJSON(ctx, &inspect, "plugin", "inspect", setup.PluginKey); err != nil {
		return nil, err
	}
	m := inspect.ManifestJSON
	drivers, _ := m["environmentDrivers"].([]any)
	var createos []any
	for _, d := range drivers {
		if d, ok := d.(map[string]any); ok && d["driverKey"] == "createos" {
			d["displayName"] = otherDisplayName
			d["description"] = "The createos driver of a second plugin."
			createos = append(createos, d)
		}
	}
	if len(createos) != 1 {
		return nil, fmt.Errorf("plugin inspect %s: %d createos drivers in the manifest", setup.PluginKey, len(createos))
	}
	m["id"], m["displayName"], m["description"] = otherPluginKey, otherDisplayName, "A second plugin declaring createos."
	m["environmentDrivers"] = createos
	return m, nil
}

// pluginIDOf is the database id plugin list shows for key, "" when it
// lists none.
func (h env) pluginIDOf(ctx context.Context, key string) (string, error) {
	var list []struct {
		ID        string `json:"id"`
		PluginKey string `json:"pluginKey"`
	}
	if err := h.PC.RunJSON(ctx, &list, "plugin", "list"); err != nil {
		return "", err
	}
	for _, p := range list {
		if p.PluginKey == key {
			return p.ID, nil
		}
	}
	return "", nil
}
