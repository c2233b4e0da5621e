package rpctest_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type dispatchFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

func (f dispatchFunc) Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return f(ctx, method, params)
}

// leases answers acquire with a lease and echo with its params.
var leases = dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "acquire":
		return map[string]any{"providerLeaseId": "L1", "metadata": map[string]any{"remoteCwd": "/w", "fakeRootDir": "/tmp/r"}}, nil
	case "echo", "health":
		return params, nil
	}
	return nil, rpc.MethodNotFound(method)
})

func TestPlaySubstitutesAndWaits(t *testing.T) {
	c, _ := rpctest.Serve(t, leases, rpc.Options{Logger: zerolog.Nop()})
	var sent []string
	c.Sent = func(line []byte) { sent = append(sent, string(line)) }
	script := strings.Join([]string{
		"# a comment, then a blank line",
		"",
		`{"jsonrpc":"2.0","id":1,"method":"acquire"}`,
		`{"jsonrpc":"2.0","id":2,"method":"echo","params":{"lease":"{{lease}}","cwd":"{{remoteCwd}}","host":"{{host}}"}}`,
		`@nowait {"jsonrpc":"2.0","id":"n","method":"echo","params":{}}`,
		`@wait "n"`,
		`{"jsonrpc":"2.0","method":"note"}`,
		`@raw this is not JSON`,
		`@bigline 300`,
	}, "\n")
	vars := map[string]string{"host": "/h"}
	if err := c.Play(context.Background(), []byte(script), vars); err != nil {
		t.Fatal(err)
	}
	if vars["lease"] != "L1" || vars["remoteCwd"] != "/w" || vars["fakeRootDir"] != "/tmp/r" {
		t.Errorf("vars = %v", vars)
	}
	lines := c.Transcript()
	if len(lines) != 5 {
		t.Fatalf("worker printed %d lines, want 5 replies:\n%s", len(lines), lines)
	}
	if want := `{"jsonrpc":"2.0","id":2,"result":{"lease":"L1","cwd":"/w","host":"/h"}}`; string(lines[1]) != want {
		t.Errorf("echo reply = %s, want %s", lines[1], want)
	}
	if !strings.Contains(string(lines[3]), `"id":null`) || !strings.Contains(string(lines[3]), `-32700`) {
		t.Errorf("raw line reply = %s", lines[3])
	}
	if len(sent) != 6 || sent[5] != `{"jsonrpc":"2.0","id":"big","method":"health","params":{"pad":"<220 bytes>"}}` {
		t.Errorf("sent = %q", sent)
	}
}

func TestReadNamesALineThatIsNotJSON(t *testing.T) {
	r, w := io.Pipe()
	_, in := io.Pipe()
	p := rpctest.NewPeer(r, in)
	go func() {
		_, _ = io.WriteString(w, "{\"id\":1,\"result\":true}\nnot json\n")
		w.Close()
	}()
	ctx := context.Background()
	if m, err := p.Read(ctx); err != nil || !m.IsReply() || string(m.ID) != "1" {
		t.Fatalf("first line = %+v, %v", m, err)
	}
	if m, err := p.Read(ctx); err == nil || string(m.Raw) != "not json" || !strings.Contains(err.Error(), `"not json"`) {
		t.Fatalf("second line = %+v, %v", m, err)
	}
	if _, err := p.Read(ctx); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
	if rest, err := p.Wait(ctx); err != nil || len(rest) != 0 {
		t.Fatalf("Wait = %v, %v", rest, err)
	}
}

func TestCallNextNumbersItsOwnIDs(t *testing.T) {
	c, _ := rpctest.Serve(t, leases, rpc.Options{Logger: zerolog.Nop()})
	for _, tc := range []struct {
		next   bool // CallNext rather than Call with id 1
		wantID string
		param  string
	}{
		{true, `"call-1"`, "a"},
		{false, `1`, "b"},
		{true, `"call-2"`, "c"},
		{false, `1`, "d"},
		{true, `"call-3"`, "e"},
	} {
		params := map[string]any{"p": tc.param}
		var m rpctest.Msg
		if tc.next {
			m, _ = c.CallNext("echo", params, "", "")
		} else {
			m, _ = c.Call(1, "echo", params, "", "")
		}
		var got map[string]any
		c.Result(m, &got)
		if string(m.ID) != tc.wantID || got["p"] != tc.param {
			t.Errorf("reply id %s with %v, want id %s with p %q", m.ID, got, tc.wantID, tc.param)
		}
	}
}
