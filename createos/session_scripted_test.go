package createos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Session tests against the reference fixture's scripted provider, where the
// frames and the answers are exactly what a test says.

const loginHome = "/tmp/paperclip-adapter-login/7c9e6679-7425-40de-944b-e07fc1f90ae7"

func loginParams(key, home string) *sessions.LoginPtyOpenParams {
	return &sessions.LoginPtyOpenParams{SessionBase: sessions.SessionBase{HostRouteID: "0e9c1c57-0f5e-4c55-9c1b-7b3e0e1d2f00",
		DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", ProviderLeaseID: "sb_test"}, LoginCommandKey: key, SessionHome: home}
}

func duplexParams(argv ...string) *sessions.DuplexOpenParams {
	return &sessions.DuplexOpenParams{SessionBase: sessions.SessionBase{HostRouteID: "duplex-route-1", DriverKey: Key,
		CompanyID: "company-a", EnvironmentID: "env-a", ProviderLeaseID: "sb_test"}, Command: argv}
}

// PTY output is delivered as raw bytes in order, a UTF-8 sequence split
// across frames included (the route table decodes it); stdout frames are
// not a PTY's.
func TestLoginPTYDeliversRawBytesAcrossFrames(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	acquire(t, d, reuse)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
		ndjson(w, dataFrameBytes(1, "pty", []byte{0xe2, 0x82}), dataFrame(2, "stdout", "not the terminal"),
			dataFrameBytes(3, "pty", []byte{0xac, '\n'}), `{"type":"exit","exit_code":0}`)
	}
	sink := newRecSink(t)
	ch, err := d.OpenLoginPty(t.Context(), loginParams("codex", loginHome), sink)
	if err != nil {
		t.Fatal(err)
	}
	if e := sink.waitExit(); e.code == nil || *e.code != 0 || e.transportClosed {
		t.Fatalf("exit %+v", e)
	}
	if got, want := sink.chunks(), [][]byte{{0xe2, 0x82}, {0xac, '\n'}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Data calls %q, want %q", got, want)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The home is made by exec and the CLI runs through bash -lc in a 120×30
// PTY in the workspace, with HOME, its own home variable and TERM, and
// neither env nor timeout_ms in the body, as in the reference's v0.2 login
// tests.
func TestLoginBodyPerKey(t *testing.T) {
	const script = `login_command=$(command -v '%[1]s') || exit 127; login_path="$PATH"; ` +
		`case "$login_command" in */.asdf/shims/*) login_command=$(asdf which '%[1]s') || exit 127; login_path="${login_command%%/*}:$PATH";; esac; ` +
		`[ -x "$login_command" ] || exit 126; exec env %[2]s PATH="$login_path" "$login_command" %[3]s`
	h := "'" + loginHome + "'"
	cases := []struct {
		key, env, args string
	}{
		{"claude", "HOME=" + h + " TERM='xterm-256color'", "'setup-token'"},
		{"codex", "CODEX_HOME=" + h + " HOME=" + h + " TERM='xterm-256color'", "'login' '--device-auth'"},
		{"grok", "GROK_HOME=" + h + " HOME=" + h + " TERM='xterm-256color'", "'login' '--device-auth'"},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			acquire(t, d, reuse)
			s.reset()
			ch, err := d.OpenLoginPty(t.Context(), loginParams(tc.key, loginHome), newRecSink(t))
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close(t.Context())
			calls := s.snapshot()
			if len(calls) < 2 || calls[0].String() != "POST /v1/sandboxes/sb_test/exec" || calls[1].String() != "POST /v1/sandboxes/sb_test/processes" {
				t.Fatalf("calls %v", calls)
			}
			if got, want := calls[0].json(t), map[string]any{"cmd": "/bin/mkdir", "args": []any{"-p", "--", loginHome}}; !reflect.DeepEqual(got, want) {
				t.Errorf("E8 body %v, want %v", got, want)
			}
			body := calls[1].json(t)
			wantScript := fmt.Sprintf(script, tc.key, tc.env, tc.args)
			want := map[string]any{"cmd": "/bin/bash", "args": []any{"-lc", wantScript}, "cwd": "/paperclip-workspace",
				"pty": map[string]any{"cols": float64(120), "rows": float64(30)}}
			if !reflect.DeepEqual(body, want) {
				t.Errorf("E10 body\n%v\nwant\n%v", body, want)
			}
			raw := string(calls[1].Body)
			for _, frag := range []string{"command -v '" + tc.key + "'", "*/.asdf/shims/*", "asdf which '" + tc.key + "'", `PATH="$login_path"`} {
				if !strings.Contains(wantScript, frag) || !strings.Contains(raw, jsonFragment(frag)) {
					t.Errorf("the script lacks %q", frag)
				}
			}
		})
	}
}

// jsonFragment is frag as it reads inside a JSON string.
func jsonFragment(frag string) string {
	return strings.ReplaceAll(frag, `"`, `\"`)
}

// Refusals come before any request, with the reference's messages.
func TestSessionOpenRefusals(t *testing.T) {
	other := duplexParams("cat")
	other.EnvironmentID = "env-b"
	otherLogin := loginParams("codex", loginHome)
	otherLogin.CompanyID = "company-b"
	unknownLease := duplexParams("cat")
	unknownLease.ProviderLeaseID = "sb_other"
	cases := []struct {
		name string
		open func(d *Driver) error
		want string
	}{
		{"empty home", loginOpen(loginParams("codex", "")), "CreateOS login session home is invalid."},
		{"home outside the root", loginOpen(loginParams("codex", "/tmp/elsewhere/7c9e6679-7425-40de-944b-e07fc1f90ae7")), "CreateOS login session home is invalid."},
		{"home not a uuid", loginOpen(loginParams("codex", "/tmp/paperclip-adapter-login/not-a-uuid")), "CreateOS login session home is invalid."},
		{"home with more", loginOpen(loginParams("codex", loginHome+"/../x")), "CreateOS login session home is invalid."},
		{"home with a quote", loginOpen(loginParams("codex", loginHome+"'")), "CreateOS login session home is invalid."},
		{"unknown key", loginOpen(loginParams("bash", loginHome)), "CreateOS login command is not supported."},
		{"login of another company", loginOpen(otherLogin), errSessionLease.Error()},
		{"no command", duplexOpen(duplexParams()), "CreateOS duplex command is invalid."},
		{"empty program", duplexOpen(duplexParams("")), "CreateOS duplex command is invalid."},
		{"empty argument", duplexOpen(duplexParams("cat", "")), "CreateOS duplex command is invalid."},
		{"NUL", duplexOpen(duplexParams("cat", "a\x00b")), "CreateOS duplex command is invalid."},
		{"duplex of another environment", duplexOpen(other), errSessionLease.Error()},
		{"lease not acquired here", duplexOpen(unknownLease), errSessionLease.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			acquire(t, d, reuse)
			s.reset()
			if err := tc.open(d); err == nil || err.Error() != tc.want {
				t.Fatalf("err %v, want %s", err, tc.want)
			}
			if calls := s.snapshot(); len(calls) != 0 {
				t.Errorf("calls %v", calls)
			}
		})
	}
}

func loginOpen(p *sessions.LoginPtyOpenParams) func(d *Driver) error {
	return func(d *Driver) error {
		ch, err := d.OpenLoginPty(context.Background(), p, nil)
		if ch != nil {
			_ = ch.Close(context.Background())
		}
		return err
	}
}

func duplexOpen(p *sessions.DuplexOpenParams) func(d *Driver) error {
	return func(d *Driver) error {
		ch, err := d.OpenDuplex(context.Background(), p, nil)
		if ch != nil {
			_ = ch.Close(context.Background())
		}
		return err
	}
}

// A home mkdir that fails is the reference's message, before any process.
func TestLoginHomePreparationFailure(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	acquire(t, d, reuse)
	s.reset()
	s.hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/exec") {
			success(w, map[string]any{"result": map[string]any{"exit_code": 1, "stdout": "", "stderr": "mkdir: denied"}})
			return true
		}
		return false
	}
	_, err := d.OpenLoginPty(t.Context(), loginParams("claude", loginHome), newRecSink(t))
	if err == nil || err.Error() != "CreateOS login home preparation failed." {
		t.Fatalf("err %v", err)
	}
	if n := s.count("POST /v1/sandboxes/sb_test/processes"); n != 0 {
		t.Errorf("%d process creations", n)
	}
}

// A creation the provider refused (below 500) made nothing: the sandbox
// is still kept. One that may have succeeded (5xx) leaves the lease unfit
// to keep: the release deletes it and says so.
func TestSessionCreationFailure(t *testing.T) {
	cases := []struct {
		status  int
		destroy bool
		log     string
	}{
		{400, false, loginName + " process creation failed (HTTP 400)."},
		{502, true, loginName + " process creation failed (HTTP 502)."},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			l := acquire(t, d, reuse)
			s.hook = failing(tc.status, processCreation)
			ctx, logs := logContext(t)
			_, err := d.OpenLoginPty(ctx, loginParams("codex", loginHome), newRecSink(t))
			wantErr(t, err, fmt.Sprintf("CreateOS request failed (HTTP %d) during process creation.", tc.status))
			if errors.Is(err, sessions.ErrSessionMayLive) != tc.destroy {
				t.Errorf("%v: wraps ErrSessionMayLive %v, want %v", err, !tc.destroy, tc.destroy)
			}
			wantLogs(t, logs.String(), tc.log)
			if strings.Contains(logs.String(), "test-secret") {
				t.Errorf("the log carries the provider's body: %s", logs.String())
			}
			s.hook, s.calls = nil, nil
			rc, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse))
			if err != nil {
				t.Fatal(err)
			}
			if destroyed := rc != nil && rc.State == "destroyed"; destroyed != tc.destroy || (s.count("DELETE /v1/sandboxes/sb_test") > 0) != tc.destroy {
				t.Errorf("receipt %+v, calls %v", rc, s.snapshot())
			}
		})
	}
}

// Close is bounded by its context: a DELETE that never answers leaves the
// end unconfirmed, the channel's requests are cut, and Exit says the
// transport closed.
func TestSessionCloseRespectsItsContext(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	acquire(t, d, reuse)
	s.connect = neverExits
	arrived := make(chan struct{})
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if !processDeletion(r) {
			return false
		}
		close(arrived)
		<-r.Context().Done()
		return true
	}
	sink := newRecSink(t)
	ch, err := d.OpenDuplex(t.Context(), duplexParams("sleep", "30"), sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	wantErr(t, ch.Close(ctx), "CreateOS process tree termination was not confirmed.")
	if e, ok := sink.exit(); !ok || !e.transportClosed || e.code != nil {
		t.Fatalf("exit %+v %v", e, ok)
	}
	if err := ch.Close(t.Context()); err == nil {
		t.Error("a second close confirmed what the first could not")
	}
	var got []string
	for _, c := range s.snapshot() {
		if !strings.Contains(c.Path, "/connect?") {
			got = append(got, c.String())
		}
	}
	ending := func(c string) bool { return strings.Contains(c, "/signal") || strings.Contains(c, "/stdin/close") }
	want := "DELETE /v1/sandboxes/sb_test/processes/proc_test?grace_ms=1000"
	if len(got) == 0 || got[len(got)-1] != want || slices.ContainsFunc(got, ending) {
		t.Errorf("calls %v, want the tree DELETE alone to end the process", got)
	}
}

// Writes after the exit frame are refused without a request; empty writes
// are nothing.
func TestSessionWritesAfterExit(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	acquire(t, d, reuse)
	sink := newRecSink(t)
	ch, err := d.OpenDuplex(t.Context(), duplexParams("true"), sink)
	if err != nil {
		t.Fatal(err)
	}
	sink.waitExit()
	if !bytes.Equal(sink.bytes(), []byte("paperclip-createos-ready\n")) {
		t.Errorf("output %q", sink.bytes())
	}
	n := len(s.snapshot())
	if err := ch.Write(nil); err != nil {
		t.Errorf("empty write: %v", err)
	}
	if err := ch.Write([]byte("x")); err == nil || err.Error() != "CreateOS session process has exited." {
		t.Errorf("write after exit: %v", err)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.snapshot()[n:]; len(got) != 0 {
		t.Errorf("calls %v", got)
	}
}

// A write the process never takes does not hold a stop: the stop cuts it,
// then deletes the tree, and Close confirms the end.
func TestStopCutsAWriteInFlight(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	acquire(t, d, reuse)
	s.connect = neverExits
	arrived := make(chan struct{})
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if !strings.HasSuffix(r.URL.Path, "/input") {
			return false
		}
		close(arrived)
		<-r.Context().Done()
		return true
	}
	sink := newRecSink(t)
	ch, err := d.OpenDuplex(t.Context(), duplexParams("sleep", "30"), sink)
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- ch.Write([]byte("never read")) }()
	<-arrived
	ch.Stop()
	if err := <-wrote; err == nil || err.Error() != "CreateOS managed process was stopped." {
		t.Errorf("the cut write: %v", err)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e, ok := sink.exit(); !ok || e.transportClosed || e.code != nil {
		t.Errorf("exit %+v %v", e, ok)
	}
	if s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test?grace_ms=1000") < 0 {
		t.Errorf("no tree DELETE: %v", s.snapshot())
	}
	for _, extra := range []string{"POST /v1/sandboxes/sb_test/processes/proc_test/signal", "POST /v1/sandboxes/sb_test/processes/proc_test/stdin/close"} {
		if s.count(extra) != 0 {
			t.Errorf("%s besides the tree DELETE", extra)
		}
	}
}
