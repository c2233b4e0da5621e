package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
)

// FuzzLineStream feeds arbitrary input through the line stream and checks
// that every line it writes back is a well-formed JSON-RPC error response
// in valid UTF-8, and that it never stops reading early.
func FuzzLineStream(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`,
		"garbage\n{\"jsonrpc\":\"2.0\"}\r\n\n",
		`[{"jsonrpc":"2.0","id":1,"method":"x"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"x","paperclipInvocation":{"id":"i"}}`,
		"\xff\xfe\n{}",
		"{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"m\",\"params\":[]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		s := newLineStream(bytes.NewReader(data), &out, 4096)
		for {
			in, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			if in.id != nil && validID(in.id) == nil {
				t.Fatalf("passed on a request with id %q", in.id)
			}
			if len(in.params) > 0 && !json.Valid(in.params) {
				t.Fatalf("passed on invalid params %q", in.params)
			}
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !utf8.Valid(sc.Bytes()) {
				t.Fatalf("wrote invalid UTF-8 %q", sc.Text())
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("wrote a non-JSON line %q", sc.Text())
			}
			if m.JSONRPC != "2.0" || m.ID == nil || m.Error == nil || m.Error.Code == 0 || strings.TrimSpace(m.Error.Message) == "" {
				t.Fatalf("wrote a malformed error %q", sc.Text())
			}
		}
	})
}

// FuzzEnvelope checks that the envelope scanner reads every member exactly
// as hostjson.Unmarshal (the host's reading) does, wherever it does not
// hand the line over to it.
func FuzzEnvelope(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`,
		` { "ID" : "a\"b" , "Method":"m\u00e9", "params" : {"k":[1,{"a":"}"}]}, "x":null } `,
		`{"id":1.5e3,"id":-2,"result":[],"error":{"code":1},"paperclipInvocation":{"id":"i","scope":{}}}`,
		`{"jsonrpc":true,"params":"str","method":null}`,
		`{"\u0069d":1,"ſ":2}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var got envelope
		if !got.scan(data) {
			return
		}
		var want envelope
		if err := hostjson.Unmarshal(data, &want); err != nil {
			return // not an object
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scan %q\nunmarshal %q", got, want)
		}
	})
}
