// Package shquote quotes one word for a POSIX shell (sh, bash): the whole
// word in single quotes, an embedded ' written as '"'"'. Every script the
// drivers build quotes each value once, here; nothing is substituted into
// a script after it is built.
package shquote

import "strings"

// Quote is s as one shell word. A NUL cannot be passed to a command at
// all; callers that take untrusted text refuse it before quoting.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
