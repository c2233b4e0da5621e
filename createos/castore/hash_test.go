package castore

import (
	"strings"
	"testing"
)

func TestParseHash(t *testing.T) {
	h, _ := content("x")
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"lower case", h.String(), true},
		{"upper case", strings.ToUpper(h.String()), true},
		{"empty", "", false},
		{"short", h.String()[:63], false},
		{"long", h.String() + "0", false},
		{"not hex", "g" + h.String()[1:], false},
		{"a path", "../" + h.String()[3:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHash(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseHash(%q): %v", tc.in, err)
			}
			if tc.ok && got != h {
				t.Errorf("ParseHash(%q) = %s, want %s", tc.in, got, h)
			}
		})
	}
}

func TestBucketNameIsAHashOfTheID(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"", "acme", "Acme", "../../etc", "a/b", "x\x00y", strings.Repeat("z", 4096)} {
		name := bucketName(id)
		if !isHex(name, 32) {
			t.Errorf("bucket of %q is %q, not 32 hex digits", id, name)
		}
		if name == id {
			t.Errorf("bucket of %q is the id itself", id)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("%q and %q share bucket %s", id, other, name)
		}
		seen[name] = id
		if again := bucketName(id); again != name {
			t.Errorf("bucket of %q is %s, then %s", id, name, again)
		}
	}
}
