package jsonhttp

import (
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewRequestSendsJSONOnlyWithABody(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        any
		want, ctype string
	}{
		{"a body", map[string]int{"a": 1}, `{"a":1}`, "application/json"},
		{"none", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := NewRequest(t.Context(), "POST", "http://127.0.0.1/x", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if req.Body != nil {
				got, _ = io.ReadAll(req.Body)
			}
			if string(got) != tc.want || req.Header.Get("Content-Type") != tc.ctype {
				t.Errorf("body %q, type %q", got, req.Header.Get("Content-Type"))
			}
		})
	}
	if _, err := NewRequest(t.Context(), "POST", "http://127.0.0.1/x", func() {}); err == nil {
		t.Error("a body JSON cannot hold was sent")
	}
}

func TestTruncate(t *testing.T) {
	for s, want := range map[string]string{"": "", "abc": "abc", "abcd": "abc…"} {
		if got := Truncate(s, 3); got != want {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
	}
}
