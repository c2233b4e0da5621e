package sessions_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// FuzzSessionParams sends arbitrary params to every live-session method of
// a plugin whose driver opens channels. Every call is answered — a result,
// or an error the host can read (-32602, -32002), never an internal one.
// Then the params' "data" goes as a write to a live cat channel: it is
// taken, and reaches the channel as exactly its bytes, only when it is
// base64 of at least one byte that re-encodes to itself, as the host's
// decodeChannelBytes demands; anything else is -32602 and writes nothing.
func FuzzSessionParams(f *testing.F) {
	for _, seed := range []string{
		`{"hostRouteId":"duplex-route-1","driverKey":"live","companyId":"c","environmentId":"e","providerLeaseId":"l","command":["cat"]}`,
		`{"hostRouteId":"r","driverKey":"live","companyId":"c","environmentId":"e","providerLeaseId":"l","loginCommandKey":"claude","sessionHome":"/tmp/paperclip-adapter-login/0b0e2c1a-4b2f-4c3d-8e9f-0a1b2c3d4e5f"}`,
		`{"hostRouteId":"duplex-route-1","workerSessionId":"duplex-x","data":"AP8="}`,
		`{"workerSessionId":"pty-x","data":"y\r"}`, `{"hostRouteId":7}`, `{"data":"AB=="}`, `{}`,
		`{"data":"aGk="}`, `{"data":"aGk=\n"}`, `{"data":"aG\r\nk="}`, `{"data":"\naGk="}`, `{"data":7}`, `{"Data":"aGk="}`,
	} {
		f.Add(seed)
	}
	_, methodsOf := newTable()
	methods := methodsOf.Methods()
	f.Fuzz(func(t *testing.T, data string) {
		if !json.Valid([]byte(data)) {
			return
		}
		_, tb := newTable()
		defer endAll(tb)
		p := server{tb}
		for _, m := range methods {
			_, err := p.Dispatch(context.Background(), m, json.RawMessage(data))
			if err != nil && code(err) != rpc.CodeInvalidParams && code(err) != rpc.CodeWorkerError {
				t.Fatalf("%s(%s): %v (code %d)", m, data, err, code(err))
			}
		}
		checkWriteData(t, data)
	})
}

// checkWriteData sends params as a write to a live cat channel, its pair
// set to the channel's, and checks that the write is taken exactly when
// its data re-encodes to itself.
func checkWriteData(t *testing.T, params string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(params), &fields) != nil || fields == nil {
		return // not an object: refused before any data is read
	}
	d, tb := newTable()
	defer endAll(tb)
	p := server{tb}
	ctx := context.Background()
	opened, err := p.Dispatch(ctx, "duplexChannelOpen", json.RawMessage(`{"hostRouteId":"fuzz-route","driverKey":"live","companyId":"c","environmentId":"e","providerLeaseId":"l","command":["cat"]}`))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	fields["hostRouteId"], _ = json.Marshal("fuzz-route")
	fields["workerSessionId"], _ = json.Marshal(opened.(sessions.DuplexOpened).WorkerSessionID)
	raw, _ := json.Marshal(fields)
	// What the write carries, read as the host's JSON reader reads it.
	var w struct {
		Data any `json:"data"`
	}
	if hostjson.Unmarshal(raw, &w) != nil {
		t.Fatalf("%s does not decode", raw)
	}
	s, isString := w.Data.(string)
	b, decErr := base64.StdEncoding.DecodeString(s)
	take := isString && decErr == nil && len(b) > 0 && base64.StdEncoding.EncodeToString(b) == s
	_, err = p.Dispatch(ctx, "duplexChannelWrite", raw)
	got, _, _ := d.Chan(0).Received()
	switch {
	case take && (err != nil || got != string(b)):
		t.Fatalf("write %q: %v, channel got %q; want it taken as %q", s, err, got, b)
	case !take && (code(err) != rpc.CodeInvalidParams || got != ""):
		t.Fatalf("write %s: %v, channel got %q; want -32602 and nothing written", raw, err, got)
	}
}

func code(err error) int {
	var re *rpc.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}
