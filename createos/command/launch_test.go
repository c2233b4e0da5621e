package command

import (
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
)

func TestCommandScriptWithoutEnvOrStdin(t *testing.T) {
	sc, err := commandScript(Spec{Command: "/bin/echo", Args: []string{"hi"}}, "")
	if err != nil || sc != "exec env  '/bin/echo' 'hi'" {
		t.Errorf("%q %v", sc, err)
	}
	if q, _ := script.Quote("a'; touch /bad; echo '"); q != `'a'"'"'; touch /bad; echo '"'"''` {
		t.Errorf("quote %s", q)
	}
	for _, p := range []Spec{
		{Command: "a\x00b"}, {Command: "x", Args: []string{"\x00"}}, {Command: "x", Cwd: "/\x00"}, {Command: "x", Env: map[string]string{"A": "\x00"}},
	} {
		if _, err := commandScript(p, ""); err != envrule.ErrNUL {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if _, err := commandScript(Spec{}, ""); err != ErrNoCommand {
		t.Errorf("empty command: %v", err)
	}
}
