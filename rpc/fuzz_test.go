package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzLineStream feeds arbitrary input through the line stream and checks
// that every line it writes back is a well-formed JSON-RPC error response
// and that it never stops reading early.
func FuzzLineStream(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`,
		"garbage\n{\"jsonrpc\":\"2.0\"}\r\n\n",
		`[{"jsonrpc":"2.0","id":1,"method":"x"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"x","paperclipInvocation":{"id":"i"}}`,
		"\xff\xfe\n{}",
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
