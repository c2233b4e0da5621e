package launch

import (
	"maps"
	"slices"
	"strconv"
)

// MaxArgLen: the longest string Linux passes to a program (MAX_ARG_STRLEN 131072 counts the
// string's NUL).
const MaxArgLen = 131071

// TooLong reports the first string of c that Linux would refuse to pass to a program: an
// element of Argv or an environment entry "NAME=VALUE" longer than MaxArgLen bytes. what is
// "argument 2" / "the command" / "environment variable NAME" style text naming it (never its
// value); n its length. Argv is looked at first, in order, then the environment in name order.
// Script passes each of these strings to env, and env to the command, so such a string fails
// with "argument list too long" whichever way the command is started.
func TooLong(c Command) (what string, n int, ok bool) {
	for i, a := range c.Argv {
		if len(a) <= MaxArgLen {
			continue
		}
		if i == 0 {
			return "the command", len(a), true
		}
		return "argument " + strconv.Itoa(i), len(a), true
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		if n := len(k) + 1 + len(c.Env[k]); n > MaxArgLen {
			return "environment variable " + k, n, true
		}
	}
	return "", 0, false
}
