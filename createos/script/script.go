// Package script builds every shell script the createos driver runs in a
// sandbox, word by word: a value (a path, an argument, a variable's value)
// becomes a word through Value, which quotes it once, as the word is made;
// the other words are the script's own fixed text (Sh constants) and modes.
// Nothing is substituted into a script after it is built, so no value can
// be read as shell syntax, as a placeholder, or twice. A value holding NUL
// is refused (envrule.ErrNUL): no shell word can carry it.
package script

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// Word is one shell word of a script, or a part of one.
type Word interface{ shell() (string, error) }

// Sh is fixed shell text: a program, an option, an expansion of the
// script's own variables. Only constants are converted to Sh, never a
// value.
type Sh string

func (s Sh) shell() (string, error) { return string(s), nil }

// Value is data the script operates on, quoted once.
type Value string

func (v Value) shell() (string, error) { return Quote(string(v)) }

// Mode is a permission mode as chmod reads it: octal digits, no prefix.
type Mode uint32

func (m Mode) shell() (string, error) { return strconv.FormatUint(uint64(m), 8), nil }

// Cat is one word made of several parts written without spaces, such as
// an assignment from a command substitution.
type Cat []Word

func (c Cat) shell() (string, error) {
	var b strings.Builder
	for _, w := range c {
		s, err := w.shell()
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// Quote is v as one shell word; NUL is refused.
func Quote(v string) (string, error) {
	if envrule.HasNUL(v) {
		return "", envrule.ErrNUL
	}
	return shquote.Quote(v), nil
}

// How a script's commands are joined.
const (
	And   = " && " // the first failure ends the script
	Lines = "\n"   // one command a line
	Seq   = "; "   // each command runs whatever the one before did
)

// Script is a list of simple commands joined by one separator. The first
// error (a value that cannot be quoted) sticks and is what Build returns.
type Script struct {
	sep  string
	cmds []string
	err  error
}

// New starts a script whose commands are joined by sep (And, Lines, Seq).
func New(sep string) *Script { return &Script{sep: sep} }

// Run appends one command of words separated by spaces.
func (s *Script) Run(words ...Word) *Script {
	if s.err != nil {
		return s
	}
	parts := make([]string, len(words))
	for i, w := range words {
		if parts[i], s.err = w.shell(); s.err != nil {
			return s
		}
	}
	s.cmds = append(s.cmds, strings.Join(parts, " "))
	return s
}

// Build is the script, or the first error met while it was written.
func (s *Script) Build() (string, error) {
	if s.err != nil {
		return "", s.err
	}
	return strings.Join(s.cmds, s.sep), nil
}

// shell makes a script a word of another: a command list run after
// another, as in `rm -f -- x; guard && ...`.
func (s *Script) shell() (string, error) { return s.Build() }

// Env is the assignments of env in name order, separated by spaces
// (NAME='value' NAME='value'; "" for none), as `env` reads them. A name
// that is not a variable name is refused (envrule.Check).
func Env(env map[string]string) Word { return envWord(env) }

type envWord map[string]string

func (e envWord) shell() (string, error) {
	if err := envrule.Check(e); err != nil {
		return "", err
	}
	parts := make([]string, 0, len(e))
	for _, k := range slices.Sorted(maps.Keys(e)) {
		q, err := Quote(e[k])
		if err != nil {
			return "", err
		}
		parts = append(parts, k+"="+q)
	}
	return strings.Join(parts, " "), nil
}
