package createos

import (
	"path"
	"strconv"
	"strings"
)

// Transfer scripts. Every shell command a sync runs in the sandbox is built
// here, word by word: a value (a path, a pattern) becomes a word through
// value, which quotes it with shellQuote once, as the word is made; the
// other words are the script's own fixed text (sh constants) and modes.
// Nothing is substituted into a script after it is built, so no value can
// be read as shell syntax, as a placeholder, or twice.

// word is one shell word of a transfer script, or a part of one.
type word interface{ shell() (string, error) }

// sh is fixed shell text: a program, an option, an expansion of the
// guard's variables. Only constants are converted to sh, never a value.
type sh string

func (s sh) shell() (string, error) { return string(s), nil }

// value is data the script operates on, quoted once by shellQuote.
type value string

func (v value) shell() (string, error) { return shellQuote(string(v)) }

// octalMode is a permission mode as chmod reads it: octal digits, no prefix.
type octalMode uint32

func (m octalMode) shell() (string, error) { return strconv.FormatUint(uint64(m), 8), nil }

// cat is one word made of several parts written without spaces, such as
// an assignment from a command substitution.
type cat []word

func (c cat) shell() (string, error) {
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

// Expansions of the guard's result, and of the staged copy beside it.
const (
	resolved       sh = `"$resolved"`
	resolvedParent sh = `"$(dirname -- "$resolved")"`
	staged         sh = `"$staged"`
)

// transferScript is a transfer script: simple commands joined by " && ", so the
// first failure ends it.
type transferScript struct {
	cmds []string
	err  error
}

// run appends one command.
func (s *transferScript) run(words ...word) *transferScript {
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

func (s *transferScript) build() (string, error) {
	if s.err != nil {
		return "", s.err
	}
	return strings.Join(s.cmds, " && "), nil
}

// guarded starts a script with the reference's in-sandbox guard of
// candidate: it canonicalises the path at use time and exits unless it
// still lies in the workspace; later commands use "$resolved". It needs GNU
// realpath -m; without it the guard fails closed.
func guarded(candidate string) (*transferScript, error) {
	if err := assertRemotePath(candidate); err != nil {
		return nil, err
	}
	s := &transferScript{}
	s.run(cat{sh("root=$(realpath -- "), value(workspaceDir), sh(")")})
	s.run(sh("test"), sh(`"$root"`), sh("="), value(workspaceDir))
	s.run(cat{sh("resolved=$(realpath -m -- "), value(candidate), sh(")")})
	s.run(sh(`case "$resolved" in "$root"|"$root"/*) ;; *) exit 1 ;; esac`))
	return s, nil
}

// remoteGuard is the guard alone, run before a post-upload command to prove
// its cwd is contained.
func remoteGuard(candidate string) (string, error) {
	s, err := guarded(candidate)
	if err != nil {
		return "", err
	}
	return s.build()
}

// placeFileScript puts an uploaded scratch file at the mapping's target
// with its mode, and removes the scratch file once it has landed (a landing
// that did not finish leaves it to the cleanup request). The scratch file is in /tmp, another mount than the
// workspace, where mv is a copy and an unlink: a landing killed halfway
// (its call failed and the driver ended it) would leave a truncated
// target. So it is copied beside the target first (stagedName) and then
// renamed over it, in one directory: the target holds the old file or the
// new one, never a part. removeStagedScript removes a staged copy a killed
// landing left.
func placeFileScript(target, scratch string, m uint32) (string, error) {
	s, err := stagedBeside(target, scratch)
	if err != nil {
		return "", err
	}
	return s.run(sh("mkdir"), sh("-p"), sh("--"), resolvedParent).
		run(sh("cp"), sh("--"), value(scratch), staged).
		run(sh("chmod"), octalMode(m), sh("--"), staged).
		run(sh("mv"), sh("-f"), sh("--"), staged, resolved).
		run(sh("rm"), sh("-f"), sh("--"), value(scratch)).build()
}

// stagedBeside is the guard of target with $staged set to the staged copy
// of scratch beside it.
func stagedBeside(target, scratch string) (*transferScript, error) {
	s, err := guarded(target)
	if err != nil {
		return nil, err
	}
	return s.run(cat{sh("staged="), resolvedParent, sh("/"), value(stagedName(scratch))}), nil
}

// stagedName is the hidden name a scratch file's staged copy has beside
// its target.
func stagedName(scratch string) string { return "." + path.Base(scratch) }

// removeStagedScript removes the scratch file and, when the target still
// guards, the staged copy placeFileScript may have left beside it.
func removeStagedScript(target, scratch string) (string, error) {
	s, err := stagedBeside(target, scratch)
	if err != nil {
		return "", err
	}
	rm := cat{sh("rm -f -- "), value(scratch), sh("; ")}
	script, err := s.run(sh("rm"), sh("-f"), sh("--"), staged).build()
	if err != nil {
		return "", err
	}
	head, err := rm.shell()
	return head + script, err
}

// extractDirectoryScript extracts an uploaded archive into the mapping's
// target directory (merging into what is there), sets its mode and removes
// the archive.
func extractDirectoryScript(target, scratch string, m uint32) (string, error) {
	s, err := guarded(target)
	if err != nil {
		return "", err
	}
	return s.run(sh("mkdir"), sh("-p"), sh("--"), resolved).
		run(sh("tar"), sh("-xf"), value(scratch), sh("-C"), resolved).
		run(sh("chmod"), octalMode(m), sh("--"), resolved).
		run(sh("rm"), sh("-f"), sh("--"), value(scratch)).build()
}

// copyFileScript copies the mapping's source file to the scratch path.
func copyFileScript(source, scratch string) (string, error) {
	s, err := guarded(source)
	if err != nil {
		return "", err
	}
	return s.run(sh("test"), sh("-f"), resolved).
		run(sh("cp"), sh("--"), resolved, value(scratch)).build()
}

// archiveDirectoryScript archives the mapping's source directory to the
// scratch path with GNU tar, dereferencing symlinks iff follow. With an
// exclude list, tar drops by itself what it provably drops alike
// (syncrule.Exclude.TarPrune: plain paths, anchored or not, that no
// wildcard switch of tar's reads differently; --no-wildcards is there all
// the same) and archives hard links as files (--hard-dereference): the
// host filters the rest entry by entry, and a link must not lead to an
// entry it left out.
func archiveDirectoryScript(source, scratch string, follow bool, anchored, unanchored []string, filtered bool) (string, error) {
	s, err := guarded(source)
	if err != nil {
		return "", err
	}
	args := []word{sh("tar")}
	if follow {
		args = append(args, sh("-h"))
	}
	if filtered {
		args = append(args, sh("--hard-dereference"))
	}
	if len(anchored)+len(unanchored) > 0 {
		args = append(args, sh("--no-wildcards"))
	}
	if len(anchored) > 0 {
		args = append(args, sh("--anchored"))
		for _, a := range anchored {
			args = append(args, sh("--exclude"), value("./"+a))
		}
	}
	if len(unanchored) > 0 {
		args = append(args, sh("--no-anchored"))
		for _, x := range unanchored {
			args = append(args, sh("--exclude"), value(x))
		}
	}
	args = append(args, sh("-cf"), value(scratch), sh("-C"), resolved, sh("."))
	return s.run(sh("test"), sh("-d"), resolved).run(args...).build()
}
