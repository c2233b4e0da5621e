package createostest_test

import (
	"bufio"
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Unreachable is the provider gone from the network: connections are
// refused and open ones (a stream included) are cut, then the server
// listens on the same address again with its sandboxes as they were.
func TestUnreachableRefusesThenListensOnTheSameAddress(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	addr := hostPort(t, a.srv.URL)

	resp := a.raw("POST", "/sandboxes/"+id+"/exec?stream=true", map[string]any{"cmd": "/bin/bash", "args": []string{"-c", "echo up; sleep 30"}, "stream": true})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatalf("no first frame: %v", sc.Err())
	}
	if err := a.srv.Unreachable(time.Hour); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	if sc.Err() == nil {
		t.Fatal("the open stream ended cleanly; want it cut")
	}
	if n := a.srv.ActiveCuts(); n != 1 {
		t.Errorf("ActiveCuts %d after cutting one stream at work, want 1", n)
	}
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial while unreachable: %v, want connection refused", err)
	}

	if err := a.srv.Unreachable(0); err != nil {
		t.Fatal(err)
	}
	if code, st := a.state(id); code != 200 || st != "running" {
		t.Fatalf("after reopening: %d %s", code, st)
	}
	if res := a.sh(id, "echo back"); res.Result.Stdout != "back\n" {
		t.Fatalf("exec after reopening: %+v", res)
	}

	if err := a.srv.Unreachable(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the server to listen again after the window", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, _ := a.state(id); code != 200 {
		t.Fatalf("after the window: %d", code)
	}
}

// A server closed while unreachable ends its reopen timer (goleak checks)
// and stays closed.
func TestCloseWhileUnreachable(t *testing.T) {
	srv, err := createostest.Start(createostest.Options{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	addr := hostPort(t, srv.URL)
	if err := srv.Unreachable(time.Hour); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("a closed server accepts connections")
	}
	if err := srv.Unreachable(time.Hour); err == nil {
		t.Fatal("Unreachable on a closed server succeeded")
	}
}

func hostPort(t *testing.T, origin string) string {
	t.Helper()
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
