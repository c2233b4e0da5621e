package fake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// An env the command could not receive as sent is refused with the CreateOS
// driver's messages, and nothing runs; it was once run with the names
// dropped and the NULs stripped.
func TestEnvRefusedAsCreateOSRefusesIt(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	ran := filepath.Join(l.Metadata["remoteCwd"].(string), "ran")
	for _, tc := range []struct {
		env  map[string]string
		want error
	}{
		{map[string]string{"A=B": "v"}, envrule.ErrName},
		{map[string]string{"A\x00B": "v"}, envrule.ErrName},
		{map[string]string{"": "v"}, envrule.ErrName},
		{map[string]string{"A-B": "v"}, envrule.ErrName},
		{map[string]string{"A": "x\x00y"}, envrule.ErrNUL},
		{map[string]string{"PATH": "/usr/bin\x00/bin"}, envrule.ErrNUL},
	} {
		_, err := callRPC[handlers.ExecuteResult](context.Background(), d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "touch", Args: []string{ran}, Env: tc.env}, nil)
		var ce *rpc.CallError
		if !errors.As(err, &ce) || ce.Message != tc.want.Error() {
			t.Errorf("env %q: err = %v, want %q", tc.env, err, tc.want)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("env %q: the command ran", tc.env)
		}
	}
	r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Env = map[string]string{"A_1": "x=y"} }, "sh", "-c", `printf %s "$A_1"`)
	if r.Stdout != "x=y" {
		t.Fatalf("a valid env: %+v", r)
	}
}
