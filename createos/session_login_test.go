package createos

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Login PTYs against createostest: the login script really runs under
// bash -l in a 120×30 terminal, against one-line CLIs a test writes into the
// sandbox (/root/bin is first on the login PATH through Options.Path).

const testHome = "/tmp/paperclip-adapter-login/0b0e9a4c-5f1d-4c3a-9d2e-7a6b5c4d3e2f"

// loginCLI prints what a login CLI would care about, then exits 5.
const loginCLI = `#!/bin/sh
stty size
echo "argv:$*"
echo "home:$HOME cli-home:$CODEX_HOME term:$TERM"
test -d "$HOME" && echo home-exists
echo "pwd:$(pwd)"
echo "path1:${PATH%%:*}"
exit 5
`

func TestLoginPTYRunsTheResolvedCLI(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{Path: []string{"/root/.asdf/shims", "/root/bin"}})
	cases := []struct {
		name  string
		key   string
		setup string // bash run in the sandbox first
		code  int
		want  []string // lines of the terminal's output
	}{
		{"on PATH", "codex", writeFile("/root/bin/codex", loginCLI), 5, []string{
			"30 120", "argv:login --device-auth", "home:" + testHome + " cli-home:" + testHome + " term:xterm-256color",
			"home-exists", "pwd:/paperclip-workspace", "path1:/root/.asdf/shims"}},
		{"asdf shim", "codex", writeFile("/root/.asdf/shims/codex", "#!/bin/sh\necho shim\nexit 99\n") + "; " +
			writeFile("/root/bin/asdf", `#!/bin/sh
[ "$1 $2" = "which codex" ] && echo /root/.asdf/installs/codex/1.0/bin/codex`) + "; " +
			writeFile("/root/.asdf/installs/codex/1.0/bin/codex", loginCLI), 5, []string{
			"30 120", "argv:login --device-auth", "path1:/root/.asdf/installs/codex/1.0/bin"}},
		{"asdf cannot resolve", "codex", writeFile("/root/.asdf/shims/codex", "#!/bin/sh\nexit 99\n") + "; " +
			writeFile("/root/bin/asdf", "#!/bin/sh\nexit 1\n"), 127, nil},
		{"not executable", "codex", writeFile("/root/.asdf/shims/codex", "#!/bin/sh\nexit 99\n") + "; " +
			writeFile("/root/bin/asdf", "#!/bin/sh\necho /root/plain-file\n") + "; touch /root/plain-file", 126, nil},
		{"missing CLI", "grok", "true", 127, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.key); err == nil && tc.name == "missing CLI" {
				t.Skipf("%s is installed on this host, which sandboxes see", tc.key)
			}
			l := leaseOn(t, d, bp)
			c := mustClient(t, d, bp)
			if r, err := c.Exec(t.Context(), l.LeaseID(), "/bin/bash", "-c", tc.setup); err != nil || !r.OK() {
				t.Fatalf("setup: %+v %v", r, err)
			}
			ctx, logs := logContext(t)
			sink := newRecSink(t)
			from := len(srv.Requests())
			ch, err := d.OpenLoginPty(ctx, &sessions.LoginPtyOpenParams{SessionBase: sessionBase(bp, l), LoginCommandKey: tc.key, SessionHome: testHome}, sink)
			if err != nil {
				t.Fatal(err)
			}
			if e := sink.waitExit(); e.code == nil || *e.code != tc.code || e.transportClosed {
				t.Fatalf("exit %+v, want %d; output %q", e, tc.code, sink.bytes())
			}
			out := strings.ReplaceAll(string(sink.bytes()), "\r\n", "\n")
			for _, line := range tc.want {
				if !strings.Contains("\n"+out, "\n"+line+"\n") {
					t.Errorf("output %q lacks the line %q", out, line)
				}
			}
			if err := ch.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got, want := routesSince(srv, from), []R{createostest.RouteExec, rCreate}; !slices.Equal(got, want) {
				t.Errorf("requests %v, want %v", got, want)
			}
			wantLogs(t, logs.String(), loginName+" open requested.", loginName+" home prepared.",
				loginName+" process opened.", loginName+" exited (code="+strconv.Itoa(tc.code)+").")
		})
	}
}

// writeFile is bash that writes an executable file.
func writeFile(path, content string) string {
	q, _ := script.Quote(content)
	p, _ := script.Quote(path)
	return "mkdir -p \"$(dirname " + p + ")\" && printf '%s' " + q + " > " + p + " && chmod +x " + p
}

// wantLogs checks that the messages appear in the log in this order.
func wantLogs(t *testing.T, log string, msgs ...string) {
	t.Helper()
	rest := log
	for _, m := range msgs {
		i := strings.Index(rest, `"message":"`+m+`"`)
		if i < 0 {
			t.Errorf("log lacks %q after the earlier lines; log:\n%s", m, log)
			return
		}
		rest = rest[i:]
	}
}
