package setup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunLogText(t *testing.T) {
	content := `{"ts":"t","stream":"stdout","chunk":"a\n","seq":1}` + "\n" + `{"ts":"t","stream":"stderr","chunk":"b","seq":2}` + "\n"
	if got := RunLogText(content); got != "a\nb" {
		t.Fatalf("runLogText = %q", got)
	}
}

func TestInstalledPackagesIsThePluginsPackages(t *testing.T) {
	modules := t.TempDir()
	for _, d := range []string{"paperclip-plugin-go-sandbox", "paperclip-go-sandbox-linux-x64", "left-pad", ".bin"} {
		if err := os.Mkdir(filepath.Join(modules, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := InstalledPackages(modules)
	if want := []string{"paperclip-go-sandbox-linux-x64", "paperclip-plugin-go-sandbox"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("installedPackages = %v, %v; want %v", got, err, want)
	}
	if _, err := InstalledPackages(filepath.Join(modules, "missing")); err == nil || !strings.Contains(err.Error(), "plugin directory") {
		t.Errorf("a missing node_modules: %v", err)
	}
}

// A machine without Chromium fails the browser flow, with what to
// install; it is never skipped.
func TestBrowserFlowFailsWithoutChromium(t *testing.T) {
	h := &Env{Opts: Options{Chromium: filepath.Join(t.TempDir(), "chromium")}}
	err := h.StartBrowser(t.Context())
	if err == nil || !strings.Contains(err.Error(), "apt-get install chromium") || !strings.Contains(err.Error(), "never skipped") {
		t.Fatalf("startBrowser without Chromium: %v", err)
	}
	if h.browser != nil {
		t.Error("a browser flow was set up without Chromium")
	}
}

// The chaos stub is the stub when no flag is there, and the prelude sits
// after the probes (a --version probe never holds).
func TestChaosStubHoldsOnlyTheAgent(t *testing.T) {
	if !strings.Contains(ChaosStubAgent, chaosPrelude) || strings.Replace(ChaosStubAgent, chaosPrelude, "", 1) != StubAgent {
		t.Fatal("the chaos stub is not the stub with the prelude")
	}
	if strings.Index(ChaosStubAgent, chaosPrelude) < strings.Index(ChaosStubAgent, "--version)") {
		t.Fatal("the prelude runs before the probes")
	}
}
