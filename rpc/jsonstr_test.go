package rpc

import (
	"encoding/json"
	"testing"
)

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x1f\n\r\t", "ünï😀", "\xff\xfe bad", "\u2028\u2029"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := appendJSONString(nil, in)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("invalid JSON %q for %q: %v", out, in, err)
		}
		want, _ := json.Marshal(string(in))
		var wantStr string
		_ = json.Unmarshal(want, &wantStr)
		if got != wantStr {
			t.Fatalf("decodes to %q, encoding/json gives %q", got, wantStr)
		}
	})
}
