package syncrule

import (
	"slices"
	"strings"
)

// Exclude is a directory mapping's exclude list, read once. It means what
// the host means by it: the host decides what it keeps with
// adapter-utils exclude-patterns.js (excludePatternMatches, through
// shouldExcludePath in its restore baseline and merge,
// workspace-restore-merge.js, and its overlay staging,
// sandbox-managed-runtime.js), and it writes its lists for that reader: a
// path relative to the mapping's directory, whole segments only, and "*"
// only as a leading "*/" or a trailing "/*":
//
//	P        the entry P and everything below it (anchored at the mapping's root)
//	P/*      everything below P, not P itself
//	*/P      P as a run of whole segments anywhere, and everything below
//	*/P/*    the same as */P
//
// Everything else is literal: "app/[id]", "a{b,c}", "notes?.md" and "**"
// name themselves. Two readings are added, each for an input the host's
// reader would misread and the host's own transports read as tar globs:
//
//   - a backslash before "\", "*", "?" or "[" is that character: the host
//     escapes referenced projects' git-ignored paths so for its tar
//     fallback (escapeTarExcludeLiteral), and means the literal path;
//   - a "*" that shares its segment with other characters matches any run
//     of characters within that segment ("*.env" drops "secret.env", as
//     tar does; the SDK calls exclude "glob patterns"). A segment of stars
//     alone stays literal, as in the host's reader, so no pattern matches
//     every name of a directory.
//
// Reading more into a list is not harmless: on a workspace restore,
// whatever the host's reader keeps but a sync-out leaves behind counts as
// deleted in the sandbox, and the host's merge deletes it from the host.
// So tar's own reading (globs, matched at any depth) is no substitute.
//
// A match is closed under descent: whatever lies below a matched entry is
// matched too, so a walker may skip an excluded directory whole.
type Exclude struct {
	patterns []pattern
}

// form is where a pattern's path may stand in an entry's path.
type form uint8

const (
	atRoot    form = iota // P: P and everything below it
	belowRoot             // P/*: everything below P
	anywhere              // */P, */P/*: P as a run of whole segments anywhere
)

type pattern struct {
	form form
	segs []segment
}

// segment is one segment of a pattern's path: a literal name, or a
// wildcard name = pieces[0] * pieces[1] * … * pieces[n-1].
type segment struct {
	lit    string
	pieces []string
}

// NewExclude reads an exclude list. Every string has a meaning; patterns
// that can match no entry (an empty, "." or ".." segment: entry paths are
// clean) are dropped.
func NewExclude(list []string) Exclude {
	var e Exclude
	for _, p := range list {
		if pt, ok := parsePattern(p); ok {
			e.patterns = append(e.patterns, pt)
		}
	}
	return e
}

// Empty reports whether the list can exclude nothing.
func (e Exclude) Empty() bool { return len(e.patterns) == 0 }

// Match reports whether the entry at rel is excluded. rel is the entry's
// clean slash-separated path relative to the mapping's directory ("a/b",
// never "." or with a leading "./"); "" and "." are never excluded.
func (e Exclude) Match(rel string) bool {
	if len(e.patterns) == 0 || rel == "" || rel == "." {
		return false
	}
	segs := strings.Split(rel, "/")
	for _, p := range e.patterns {
		if p.match(segs) {
			return true
		}
	}
	return false
}

// TarPrune lists the patterns that GNU tar can apply by itself with the
// very same result, for archiving on the far side: each is a plain path
// (whole literal segments, none empty, "." or "..", and no NUL, "*", "?",
// "[" or "\" anywhere, so no wildcard switch of tar's can change how it
// reads them). For an anchored path A, Match excludes exactly the entry A
// and everything below it; for an unanchored path X, exactly the entries
// with X as a run of whole segments and everything below them. That is
// what GNU tar excludes for "./"+A given after --anchored and for X given
// after --no-anchored, its member names being "./"+rel: a plain pattern is
// compared as a string with the whole name or a leading part of it that
// ends before a "/" (--recursion's FNM_LEADING_DIR), and, unanchored, with
// every tail of the name that starts after a "/". So what tar drops for
// these, Match drops too; the rest of the list is the caller's to filter.
func (e Exclude) TarPrune() (anchored, unanchored []string) {
	for _, p := range e.patterns {
		if p.form == belowRoot || !p.plain() {
			continue
		}
		lits := make([]string, len(p.segs))
		for i, s := range p.segs {
			lits[i] = s.lit
		}
		if p.form == atRoot {
			anchored = appendNew(anchored, strings.Join(lits, "/"))
		} else {
			unanchored = appendNew(unanchored, strings.Join(lits, "/"))
		}
	}
	// An anchored path with an unanchored one as a run of its segments is
	// pruned already.
	kept := anchored[:0]
	for _, a := range anchored {
		if !slices.ContainsFunc(unanchored, func(x string) bool { return NewExclude([]string{"*/" + x}).Match(a) }) {
			kept = append(kept, a)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	return kept, unanchored
}

func appendNew(list []string, s string) []string {
	for _, have := range list {
		if have == s {
			return list
		}
	}
	return append(list, s)
}

// plain reports whether every segment is a literal free of tar's pattern
// characters and of NUL.
func (p pattern) plain() bool {
	for _, s := range p.segs {
		if s.pieces != nil || strings.ContainsAny(s.lit, "*?[\\\x00") {
			return false
		}
	}
	return true
}

// parsePattern splits off the host's structural "*/" and "/*" exactly as
// excludePatternMatches does (on the pattern as written, so an escaped
// "\*/" is no prefix), then reads the path's segments.
func parsePattern(p string) (pattern, bool) {
	pt := pattern{form: atRoot}
	core := p
	switch pre, suf := strings.HasPrefix(p, "*/"), strings.HasSuffix(p, "/*"); {
	case pre && suf:
		pt.form, core = anywhere, ""
		if len(p) >= 4 { // "*/*" and "*//*" keep nothing, as slice(2, -2) does
			core = p[2 : len(p)-2]
		}
	case pre:
		pt.form, core = anywhere, p[2:]
	case suf:
		pt.form, core = belowRoot, p[:len(p)-2]
	}
	for raw := range strings.SplitSeq(core, "/") {
		s, ok := parseSegment(raw)
		if !ok {
			return pattern{}, false
		}
		pt.segs = append(pt.segs, s)
	}
	return pt, true
}

// parseSegment reads one segment: tar's literal escapes, and "*" as a
// wildcard where it shares the segment with other characters. It reports
// false for a segment no clean entry path has.
func parseSegment(raw string) (segment, bool) {
	var (
		b      strings.Builder
		pieces []string
		others bool
	)
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '\\' && i+1 < len(raw) && strings.IndexByte(`\*?[`, raw[i+1]) >= 0:
			i++
			b.WriteByte(raw[i])
			others = true
		case c == '*':
			pieces = append(pieces, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
			others = true
		}
	}
	switch {
	case pieces != nil && others:
		return segment{pieces: append(pieces, b.String())}, true
	case pieces != nil:
		return segment{lit: raw}, true // stars alone: literal
	}
	lit := b.String()
	return segment{lit: lit}, lit != "" && lit != "." && lit != ".."
}

func (p pattern) match(segs []string) bool {
	n := len(p.segs)
	switch p.form {
	case atRoot:
		return len(segs) >= n && p.matchAt(segs)
	case belowRoot:
		return len(segs) > n && p.matchAt(segs)
	}
	for i := 0; i+n <= len(segs); i++ {
		if p.matchAt(segs[i:]) {
			return true
		}
	}
	return false
}

// matchAt reports whether the pattern's segments match the first ones of
// segs.
func (p pattern) matchAt(segs []string) bool {
	for i, s := range p.segs {
		if !s.match(segs[i]) {
			return false
		}
	}
	return true
}

func (s segment) match(name string) bool {
	if s.pieces == nil {
		return s.lit == name
	}
	first, last := s.pieces[0], s.pieces[len(s.pieces)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	mid := name[len(first) : len(name)-len(last)]
	for _, piece := range s.pieces[1 : len(s.pieces)-1] {
		i := strings.Index(mid, piece)
		if i < 0 {
			return false
		}
		mid = mid[i+len(piece):]
	}
	return true
}
