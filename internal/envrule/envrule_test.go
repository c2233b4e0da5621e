package envrule

import (
	"regexp"
	"testing"
)

// The rule CreateOS had as a regular expression, which ValidName must
// match for every input.
var reference = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"PATH", true}, {"_", true}, {"a1", true}, {"A_B_9", true}, {"_9", true},
		{"", false}, {"1A", false}, {"A-B", false}, {"BAD;KEY", false}, {"A=B", false},
		{"=", false}, {"A\x00", false}, {"\x00", false}, {"A B", false}, {"É", false}, {"A.B", false},
	} {
		if got := ValidName(tc.name); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
		if ref := reference.MatchString(tc.name); ref != tc.ok {
			t.Errorf("the reference expression says %v for %q", ref, tc.name)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want error
	}{
		{nil, nil},
		{map[string]string{"A": "", "PATH": "/bin", "B": "x=y"}, nil},
		{map[string]string{"A=B": "v"}, ErrName},
		{map[string]string{"A\x00B": "v"}, ErrName},
		{map[string]string{"": "v"}, ErrName},
		{map[string]string{"A": "a\x00b"}, ErrNUL},
		{map[string]string{"PATH": "/bin\x00/evil"}, ErrNUL},
		// A bad name wins over a NUL value whatever the map's order.
		{map[string]string{"A": "\x00", "B=": "v", "C": "\x00", "D": "\x00"}, ErrName},
	} {
		for range 20 {
			if got := Check(tc.env); got != tc.want {
				t.Fatalf("Check(%q) = %v, want %v", tc.env, got, tc.want)
			}
		}
	}
	if ErrName.Error() != "Invalid sandbox environment variable." || ErrName.OperatorMessage() != ErrName.Error() {
		t.Errorf("ErrName = %q", ErrName)
	}
	if ErrNUL.Error() != "Sandbox command values cannot contain NUL." || ErrNUL.OperatorMessage() != ErrNUL.Error() {
		t.Errorf("ErrNUL = %q", ErrNUL)
	}
}

func FuzzValidName(f *testing.F) {
	for _, s := range []string{"PATH", "1A", "A=B", "", "_x9", "A\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidName(name), reference.MatchString(name); got != want {
			t.Fatalf("ValidName(%q) = %v, the reference expression says %v", name, got, want)
		}
	})
}
