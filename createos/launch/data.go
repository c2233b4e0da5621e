package launch

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
)

// The data Script reads is NUL-terminated fields, which bash's read with an empty delimiter
// takes exactly and without reading past (no field can hold a NUL), then the command's stdin:
//
//	version  cwd  stdin-flag ("0" | "1")  n  NAME=VALUE ×n (names sorted)  m  argv ×m  stdin…
//
// The version is a phrase that no other stdin starts with, so a login profile that ate part of
// the specification is caught rather than misread. Script compares it word for word.
const version = "sandbox-plugin launch 1"

// errNoCommand refuses a command without a program to run.
var errNoCommand = errors.New("launch: the command is empty")

// errData is Decode's answer for data that Data did not write.
var errData = errors.New("launch: not a command's specification")

// Data is what Script reads on its stdin: c's specification, then c's stdin. It refuses an
// empty command (no Argv or Argv[0] == ""), an environment envrule.Check refuses (its error, as
// it is), and a NUL in Argv or Cwd (envrule.ErrNUL), the same refusals and in the same order as
// a command line written for c.
func Data(c Command) (string, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return "", errNoCommand
	}
	if err := envrule.Check(c.Env); err != nil {
		return "", err
	}
	if envrule.HasNUL(c.Cwd) || slices.ContainsFunc(c.Argv, envrule.HasNUL) {
		return "", envrule.ErrNUL
	}
	var b strings.Builder
	if c.Stdin != nil {
		b.Grow(len(*c.Stdin) + 256)
	}
	field := func(s string) { b.WriteString(s); b.WriteByte(0) }
	field(version)
	field(c.Cwd)
	if c.Stdin == nil {
		field("0")
	} else {
		field("1")
	}
	field(strconv.Itoa(len(c.Env)))
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		field(k + "=" + c.Env[k])
	}
	field(strconv.Itoa(len(c.Argv)))
	for _, a := range c.Argv {
		field(a)
	}
	if c.Stdin != nil {
		b.WriteString(*c.Stdin)
	}
	return b.String(), nil
}

// Decode is Data's inverse (for tests, fuzzing and test providers): the command and its stdin.
// It refuses anything Data cannot write, so Data(Decode(d)) == d whenever Decode accepts d; a
// command without environment decodes with a nil Env.
func Decode(data string) (Command, error) {
	r := fields{rest: data}
	var c Command
	if r.next() != version {
		return Command{}, errData
	}
	c.Cwd = r.next()
	in := r.next()
	if n := r.count(0); n > 0 {
		c.Env = make(map[string]string, n)
		prev := ""
		for range n {
			k, v, ok := strings.Cut(r.next(), "=")
			if !ok || !envrule.ValidName(k) || k <= prev {
				return Command{}, errData
			}
			c.Env[k], prev = v, k
		}
	}
	for range r.count(1) {
		c.Argv = append(c.Argv, r.next())
	}
	switch {
	case r.bad || len(c.Argv) == 0 || c.Argv[0] == "":
		return Command{}, errData
	case in == "1":
		c.Stdin = &r.rest
	case in != "0" || r.rest != "":
		return Command{}, errData
	}
	return c, nil
}

// fields reads NUL-terminated fields from rest; the first that is missing or malformed sets
// bad, and every read after it is "".
type fields struct {
	rest string
	bad  bool
}

func (f *fields) next() string {
	s, rest, ok := strings.Cut(f.rest, "\x00")
	if f.bad || !ok {
		f.bad = true
		return ""
	}
	f.rest = rest
	return s
}

// count reads a count of at least least, written as Data writes it (decimal, no sign, no
// leading zero). A count larger than the fields left is malformed: it would run out anyway,
// and refusing it first keeps a hostile count from making Decode loop.
func (f *fields) count(least int) int {
	s := f.next()
	n, err := strconv.Atoi(s)
	if f.bad || err != nil || n < least || strconv.Itoa(n) != s || n > strings.Count(f.rest, "\x00") {
		f.bad = true
		return 0
	}
	return n
}
