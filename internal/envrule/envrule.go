// Package envrule holds the rule for a command's environment that every
// driver shares: a variable's name is a shell identifier and no value holds
// a NUL. A driver refuses a call that breaks it, with the reference
// plugin's messages, before anything runs; nothing is dropped or rewritten.
package envrule

import (
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
)

// The reference messages (the CreateOS plugin's, which the host shows as
// they are).
var (
	// ErrName refuses a name that is not [A-Za-z_][A-Za-z0-9_]*: one with
	// "=" or a NUL could not reach the command as that name.
	ErrName = operator.New("Invalid sandbox environment variable.")
	// ErrNUL refuses a value with a NUL, which no command can receive.
	ErrNUL = operator.New("Sandbox command values cannot contain NUL.")
)

// ValidName reports whether name is a shell identifier:
// [A-Za-z_][A-Za-z0-9_]*.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Check refuses env when a name is not ValidName (ErrName) or, every name
// being valid, when a value holds a NUL (ErrNUL). The answer does not
// depend on the map's order.
func Check(env map[string]string) error {
	for k := range env {
		if !ValidName(k) {
			return ErrName
		}
	}
	for _, v := range env {
		if HasNUL(v) {
			return ErrNUL
		}
	}
	return nil
}

// HasNUL reports whether v holds a NUL byte.
func HasNUL(v string) bool { return strings.IndexByte(v, 0) >= 0 }
