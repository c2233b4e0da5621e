package handlers

// Manifest identity of this plugin.
const (
	PluginID          = "paperclip.go-sandbox-provider"
	PluginDisplayName = "Go Sandbox Provider"
	PluginDescription = "Sandbox provider environment drivers in one Go worker: a local fake sandbox and CreateOS."
	PluginAuthor      = "sandbox-plugin developers"
)

// Manifest is the Paperclip plugin manifest (PaperclipPluginManifestV1) for
// the enabled drivers.
type Manifest struct {
	ID                 string              `json:"id"`
	APIVersion         int                 `json:"apiVersion"`
	Version            string              `json:"version"`
	DisplayName        string              `json:"displayName"`
	Description        string              `json:"description"`
	Author             string              `json:"author"`
	Categories         []string            `json:"categories"`
	Capabilities       []string            `json:"capabilities"`
	Entrypoints        map[string]string   `json:"entrypoints"`
	EnvironmentDrivers []DriverDeclaration `json:"environmentDrivers"`
}

// Manifest returns the manifest of the plugin at version.
func (p *Plugin) Manifest(version string) Manifest {
	m := Manifest{
		ID: PluginID, APIVersion: 1, Version: version,
		DisplayName: PluginDisplayName, Description: PluginDescription, Author: PluginAuthor,
		Categories:   []string{"automation"},
		Capabilities: []string{"environment.drivers.register"},
		Entrypoints:  map[string]string{"worker": "./dist/worker.js"},
	}
	for _, d := range p.Drivers() {
		m.EnvironmentDrivers = append(m.EnvironmentDrivers, declare(d))
	}
	return m
}
