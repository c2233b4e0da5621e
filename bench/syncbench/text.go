package syncbench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// The generated repository's text: source files in four languages, JSON
// and markdown, each made of a language's lines filled with identifiers
// and words from one pool per repository. Real code compresses 3-4x with
// gzip or zstd because its names repeat with a skewed frequency while its
// lines differ; the pool is picked with the same skew (zipfPower) and
// every line is filled afresh, so no two files and few lines repeat.

// roots are the parts identifiers and comments are made of.
var roots = strings.Fields(`user account cache token request response parse render build config
	client server handler session lease sandbox worker queue task job event stream buffer frame
	channel message payload header body route path file dir tree node edge graph index key value
	store record entry batch chunk block page row column table schema field type kind mode state
	status error result option flag limit count size offset length width height time date span
	trace log metric sample window rate budget quota policy rule match filter sort merge split
	join read write open close start stop run wait retry cancel resume pause fork sync copy move
	load save fetch push pull commit branch tag diff patch hash sum check verify sign encode decode
	compress archive extract pack unpack scan walk visit emit watch notify signal lock unlock
	acquire release reserve allocate free pool slot cursor scope context plugin driver provider
	manifest version release bundle asset image layer volume mount network socket port address host`)

// glue are the short words of comments and prose.
var glue = strings.Fields(`the a an of to in on for with is are be when if then this that it
	its by from as at or and not no each every one more than once only before after until so`)

// zipfPower skews pool picks toward the pool's head: a pick is the
// pool's element at n·u^zipfPower for a uniform u.
const zipfPower = 2.5

// pools are one repository's identifiers.
type pools struct {
	idents []string // lowerCamel, two or three roots each
	pkgs   []string // lower case, one or two roots
}

// newPools makes the identifier pool of the repository generated from seed.
func newPools(seed uint64) *pools {
	r := rand.New(rand.NewPCG(seed, 0x1d))
	p := &pools{}
	seen := map[string]bool{}
	for len(p.idents) < 3000 {
		n := 1 + r.IntN(3)
		var b strings.Builder
		for i := range n {
			w := roots[r.IntN(len(roots))]
			if i > 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		}
		if s := b.String(); !seen[s] {
			seen[s] = true
			p.idents = append(p.idents, s)
		}
	}
	for i := range 400 {
		p.pkgs = append(p.pkgs, strings.ToLower(p.idents[i]))
	}
	return p
}

// writer fills one file: its random source, the pools, the bytes so far
// and the names of the declaration being written, which its lines reuse
// as real code does.
type writer struct {
	r      *rand.Rand
	p      *pools
	b      []byte
	locals []string
}

// zipf is an index into a list of n, skewed toward its head.
func (w *writer) zipf(n int) int {
	return min(n-1, int(float64(n)*math.Pow(w.r.Float64(), zipfPower)))
}

func (w *writer) ident() string {
	if len(w.locals) > 0 && w.r.IntN(100) < localShare {
		return w.locals[w.r.IntN(len(w.locals))]
	}
	s := w.p.idents[w.zipf(len(w.p.idents))]
	if len(w.locals) < 8 {
		w.locals = append(w.locals, s)
	}
	return s
}

// localShare is the percentage of names a declaration reuses.
const localShare = 55

func (w *writer) exported() string {
	s := w.ident()
	return strings.ToUpper(s[:1]) + s[1:]
}

func (w *writer) snake() string {
	s := w.ident()
	var b strings.Builder
	for _, c := range s {
		if c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

// words is a comment's or a sentence's run of n to m words.
func (w *writer) words(n, m int) string {
	k := n + w.r.IntN(m-n+1)
	parts := make([]string, k)
	for i := range parts {
		if w.r.IntN(3) == 0 {
			parts[i] = roots[w.zipf(len(roots))]
		} else {
			parts[i] = glue[w.zipf(len(glue))]
		}
	}
	return strings.Join(parts, " ")
}

// fill appends template t, each verb filled by the kind at its place in
// kinds: i an identifier, I an exported one, s a snake_case one, w a few
// words, n a number.
func (w *writer) fill(t, kinds string) {
	args := make([]any, len(kinds))
	for i, k := range kinds {
		switch k {
		case 'i':
			args[i] = w.ident()
		case 'I':
			args[i] = w.exported()
		case 's':
			args[i] = w.snake()
		case 'w':
			args[i] = w.words(3, 9)
		case 'n':
			args[i] = w.r.IntN(1 << (4 + w.r.IntN(12)))
		}
	}
	w.b = fmt.Appendf(w.b, t, args...)
}

// line is a template and the kinds of its verbs.
type line struct{ t, kinds string }

// language is how one language's files are made: a header, then
// declarations (open, some statements, close) until the file is full.
type language struct {
	ext        string
	header     line
	opens      []line
	statements []line
	close      string
}

var (
	goLang = language{ext: ".go",
		header: line{"// Package %s %s.\npackage %s\n\nimport (\n\t\"context\"\n\t\"fmt\"\n)\n\n", "iwi"},
		opens: []line{
			{"// %s %s.\nfunc (%s *%s) %s(ctx context.Context, %s %s) (%s, error) {\n", "IwiIIiII"},
			{"// %s %s.\nfunc %s(%s []%s, %s int) error {\n", "IwIiIi"},
			{"// %s is %s.\ntype %s struct {\n\t%s %s\n\t%s []%s\n\t%s map[string]%s\n", "IwIIIIIII"},
		},
		statements: []line{
			{"\t%s := %s.%s(%s, %d)\n", "iiIin"},
			{"\tif err := %s.%s(ctx, %s); err != nil {\n\t\treturn nil, fmt.Errorf(\"%s: %%w\", err)\n\t}\n", "iIiw"},
			{"\tfor _, %s := range %s.%s {\n\t\t%s = append(%s, %s.%s)\n\t}\n", "iiIiiiI"},
			{"\t// %s.\n", "w"},
			{"\t%s.%s = %s\n", "iIi"},
			{"\tif %s == nil {\n\t\treturn nil, %s\n\t}\n", "ii"},
			{"\tdefer %s.%s()\n", "iI"},
		},
		close: "\treturn nil\n}\n\n"}
	tsLang = language{ext: ".ts",
		header: line{"// %s\nimport { %s, %s } from \"./%s\";\nimport type { %s } from \"../%s\";\n\n", "wIIiIi"},
		opens: []line{
			{"/** %s. */\nexport async function %s(%s: %s, %s: string): Promise<%s> {\n", "wiiIiI"},
			{"export class %s extends %s {\n  private readonly %s = new Map<string, %s>();\n", "IIiI"},
		},
		statements: []line{
			{"  const %s = await %s.%s(%s, %d);\n", "iiiin"},
			{"  if (!%s) {\n    throw new Error(\"%s\");\n  }\n", "iw"},
			{"  for (const %s of %s.%s) {\n    %s.push(%s.%s);\n  }\n", "iiiiii"},
			{"  // %s\n", "w"},
			{"  %s.%s = { %s: %s, %s: %d };\n", "iiiiin"},
		},
		close: "  return undefined as never;\n}\n\n"}
	pyLang = language{ext: ".py",
		header: line{"\"\"\"%s.\"\"\"\n\nfrom .%s import %s, %s\nimport %s\n\n", "wsIIs"},
		opens: []line{
			{"\ndef %s(%s, %s=None):\n    \"\"\"%s.\"\"\"\n", "sssw"},
			{"\nclass %s(%s):\n    %s: int = %d\n", "IIsn"},
		},
		statements: []line{
			{"    %s = %s.%s(%s, %d)\n", "ssssn"},
			{"    if not %s:\n        raise ValueError(\"%s\")\n", "sw"},
			{"    for %s in %s.%s:\n        %s.append(%s.%s)\n", "ssssss"},
			{"    # %s\n", "w"},
		},
		close: "    return None\n"}
	rsLang = language{ext: ".rs",
		header: line{"//! %s.\n\nuse crate::%s::{%s, %s};\nuse std::collections::HashMap;\n\n", "wsII"},
		opens: []line{
			{"/// %s.\npub fn %s(%s: &%s, %s: u32) -> Result<%s, Error> {\n", "wssIsI"},
			{"impl %s for %s {\n    fn %s(&self) -> %s {\n", "IIsI"},
		},
		statements: []line{
			{"    let %s = %s.%s(%s, %d)?;\n", "ssssn"},
			{"    if %s.is_empty() {\n        return Err(Error::new(\"%s\"));\n    }\n", "sw"},
			{"    for %s in %s.%s.iter() {\n        %s.push(%s.%s.clone());\n    }\n", "ssssss"},
			{"    // %s\n", "w"},
		},
		close: "    todo!()\n}\n\n"}
)

// source is a file of language l of about size bytes.
func (w *writer) source(l language, size int) []byte {
	w.fill(l.header.t, l.header.kinds)
	for len(w.b) < size {
		o := l.opens[w.r.IntN(len(l.opens))]
		w.locals = w.locals[:0]
		w.fill(o.t, o.kinds)
		for range 3 + w.r.IntN(18) {
			s := l.statements[w.r.IntN(len(l.statements))]
			w.fill(s.t, s.kinds)
		}
		w.b = append(w.b, l.close...)
	}
	return cut(w.b, size)
}

// jsonDoc is a pretty-printed JSON document of about size bytes; it
// stays valid whatever size cuts it at, so it is closed, not cut.
func (w *writer) jsonDoc(size int) []byte {
	w.b = fmt.Appendf(w.b, "{\n  \"name\": %q,\n  \"version\": \"%d.%d.%d\",\n  \"items\": [\n", w.ident(), w.r.IntN(4), w.r.IntN(30), w.r.IntN(20))
	for i := 0; len(w.b) < size-40 || i == 0; i++ {
		if i > 0 {
			w.b = append(w.b, ",\n"...)
		}
		w.b = fmt.Appendf(w.b, "    {\n      \"id\": %d,\n      %q: %q,\n      %q: %t,\n      %q: [%d, %d],\n      \"description\": %q\n    }",
			w.r.IntN(100000), w.ident(), w.ident(), w.ident(), w.r.IntN(2) == 0, w.ident(), w.r.IntN(1000), w.r.IntN(1000), w.words(4, 12))
	}
	return append(w.b, "\n  ]\n}\n"...)
}

// markdown is a document of about size bytes.
func (w *writer) markdown(size int) []byte {
	w.fill("# %s\n\n", "w")
	for len(w.b) < size {
		switch w.r.IntN(4) {
		case 0:
			w.fill("## %s\n\n", "w")
		case 1:
			for range 2 + w.r.IntN(4) {
				w.fill("- %s `%s`.\n", "wi")
			}
			w.b = append(w.b, '\n')
		case 2:
			w.fill("```go\n%s := %s.%s(ctx, %s)\n```\n\n", "iiIi")
		default:
			for range 2 + w.r.IntN(5) {
				w.fill("%s. ", "w")
			}
			w.b = append(w.b, "\n\n"...)
		}
	}
	return cut(w.b, size)
}

// cut is b up to its last line end at or before size, or b whole when
// it is no longer than size.
func cut(b []byte, size int) []byte {
	if len(b) <= size {
		return b
	}
	for i := size; i > size/2; i-- {
		if b[i-1] == '\n' {
			return b[:i]
		}
	}
	return b[:size]
}
