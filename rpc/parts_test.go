package rpc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// partsDispatcher answers "parts" with a JSONParts result of text.
type partsDispatcher struct{ text string }

func (d partsDispatcher) Dispatch(context.Context, string, json.RawMessage) (any, error) {
	return rpc.JSONParts{rpc.RawPart([]byte(`{"n":1,"s":`)), rpc.TextPart(d.text), rpc.RawPart([]byte(`,"e":`)), rpc.TextPart(""), rpc.RawPart([]byte(`}`))}, nil
}

func TestJSONPartsAreWrittenAsTheirValue(t *testing.T) {
	const piece = 64 << 10
	cut := func(at int, r string) string { return strings.Repeat("a", at) + r + strings.Repeat("b", 10) }
	for _, tc := range []struct {
		name, text string
	}{
		{"small", `plain "quoted" \ back <html> & tab	nl` + "\n"},
		{"a rune across the first piece's end", cut(piece-1, "€")},
		{"a four-byte rune across it", cut(piece-2, "😀")},
		{"invalid bytes at the end of a piece", cut(piece-1, "\xe2\x82") + "\xff"},
		{"control characters", strings.Repeat("\x00\x01\x1f", piece)},
		{"many pieces of mixed text", strings.Repeat("€x😀\"\\\n", 3*piece)},
		{"line separators", "a\u2028b\u2029c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := rpctest.Serve(t, partsDispatcher{tc.text}, rpc.Options{})
			reply, _ := c.Call(1, "parts", nil, "", "")
			var got struct {
				N int    `json:"n"`
				S string `json:"s"`
				E string `json:"e"`
			}
			c.Result(reply, &got)
			want, _ := json.Marshal(tc.text) // invalid bytes become U+FFFD, as in the reply
			var wantText string
			_ = json.Unmarshal(want, &wantText)
			if got.N != 1 || got.S != wantText {
				t.Fatalf("decoded %d/%d bytes, n=%d; first difference at %d", len(got.S), len(wantText), got.N, firstDiff(got.S, wantText))
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
