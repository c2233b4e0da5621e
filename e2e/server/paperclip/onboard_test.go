package paperclip

import (
	"slices"
	"testing"
)

// Two lines of each release's `paperclipai --help`.
const (
	help916 = "Commands:\n  run [options]             Bootstrap local setup (onboard + doctor) and run Paperclip\n" +
		"  test-drive [options]      Start an isolated, initialized Paperclip instance for manual testing\n"
	help831 = "Commands:\n  onboard [options]         Interactive first-run setup wizard\n" +
		"  run [options]             Bootstrap local setup (onboard + doctor) and run Paperclip\n"
)

func TestServerStartFor(t *testing.T) {
	s := serverStartFor(help916, "/d")
	if s.args[0] != "test-drive" || s.bootstrap || !slices.Contains(s.args, "--no-browser") {
		t.Errorf("with test-drive: %+v", s)
	}
	if m := s.ready.FindStringSubmatch("│  ✔ Paperclip is ready at http://127.0.0.1:3100."); m == nil || s.base+m[1] != "http://127.0.0.1:3100" {
		t.Errorf("test-drive's ready line: %q", m)
	}
	s = serverStartFor(help831, "/d")
	want := []string{"onboard", "--yes", "--bind", "loopback", "--no-install-service", "--data-dir", "/d"}
	if !slices.Equal(s.args, want) || !s.bootstrap {
		t.Errorf("without test-drive: %+v", s)
	}
	if m := s.ready.FindStringSubmatch(`[17:10:02] INFO: Server listening on 127.0.0.1:3101`); m == nil || s.base+m[1] != "http://127.0.0.1:3101" {
		t.Errorf("onboard's listening line: %q", m)
	}
}

func TestHasCommand(t *testing.T) {
	for _, tc := range []struct {
		help, name string
		want       bool
	}{
		{help916, "test-drive", true},
		{help831, "test-drive", false},
		{"  update|upgrade [options]  Check", "update", true},
		{"  run [options]  Bootstrap local setup (onboard + doctor)", "onboard", false}, // named in a description only
	} {
		if got := hasCommand(tc.help, tc.name); got != tc.want {
			t.Errorf("hasCommand(%q, %q) = %v", tc.help, tc.name, got)
		}
	}
}
