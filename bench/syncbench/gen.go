package syncbench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The generated repository: what a repoSpec plans (planRepo, pure) and
// writing it (writeRepo). Its bytes are mostly source text, some JSON and
// markdown, a few binaries of 1-5 MiB and some already-compressed files
// (random bytes named .png, .gz, .jpg), in nested directories, with a
// tracked vendor/ tree (which a sync-out leaves out) and a few git-ignored
// files that are never committed.

// repoSpec is what the repository is generated from.
type repoSpec struct {
	mib, files int
	seed       uint64
}

// bytes is the repository's size: its files' bytes, .git not counted.
func (s repoSpec) bytes() int64 { return int64(s.mib) << 20 }

// minTextBytes is the smallest text file.
const minTextBytes = 64

// fileKind is what a file holds.
type fileKind uint8

const (
	sourceFile   fileKind = iota // source text of the file's language
	jsonFile                     // pretty-printed JSON
	markdownFile                 // prose
	blobFile                     // random bytes of 1-5 MiB
	packedFile                   // random bytes: an image or archive, already compressed
	ignoreFile                   // the repository's .gitignore
)

// plannedFile is one file of the repository.
type plannedFile struct {
	path string // slash-separated, relative to the repository
	kind fileKind
	lang *language // sourceFile only
	size int       // about: text is cut at a line end, JSON closed
	n    uint64    // its index, which seeds its content
}

// area is a top-level directory and the language of its source files.
type area struct {
	dir    string
	lang   *language
	weight int // share of the directories
}

var areas = []area{
	{"internal", &goLang, 30}, {"pkg", &goLang, 14}, {"cmd", &goLang, 4}, {"web/src", &tsLang, 24},
	{"tools", &pyLang, 8}, {"crates", &rsLang, 12}, {"vendor", &goLang, 4}, {"docs", nil, 4},
}

// ignoredFiles are written to the working tree but ignored by the
// repository's .gitignore: never committed, never synced.
var ignoredFiles = []string{"debug.log", "tmp/scratch.txt", "node_modules/left-pad/index.js", ".env.local"}

const gitignore = "node_modules/\n*.log\n/tmp/\n.env.local\n"

// planRepo lays out the repository of s: every file's path, kind and size.
func planRepo(s repoSpec) []plannedFile {
	r := rand.New(rand.NewPCG(s.seed, 0x91a))
	p := newPools(s.seed)
	dirs := planDirs(r, p, max(len(areas), s.files/12))
	budget := s.bytes()
	files := []plannedFile{{path: ".gitignore", kind: ignoreFile, size: len(gitignore)}}
	nBlobs := max(1, s.mib/60)
	blobCap := budget / 12
	for i := range nBlobs {
		size := min(int64(1<<20+r.IntN(4<<20)), blobCap)
		ext := []string{".bin", ".woff2", ".wasm"}[i%3]
		files = append(files, plannedFile{path: fmt.Sprintf("assets/%s%s", p.pkgs[i], ext), kind: blobFile, size: int(size)})
		budget -= size
	}
	nPacked := max(2, s.files*15/1000)
	packedBudget := budget * 6 / 100
	budget -= packedBudget
	nText := s.files - len(files) - nPacked
	weights := lognormal(r, nPacked+nText)
	for i := range nPacked {
		d := dirs[r.IntN(len(dirs))]
		ext := []string{".png", ".gz", ".jpg"}[i%3]
		files = append(files, plannedFile{path: path.Join(d.path, p.pkgs[i%len(p.pkgs)]+fmt.Sprint(i)+ext), kind: packedFile,
			size: share(packedBudget, weights[i], weights[:nPacked], 256)})
	}
	for i := range nText {
		d := dirs[r.IntN(len(dirs))]
		f := plannedFile{kind: sourceFile, lang: d.lang, size: share(budget, weights[nPacked+i], weights[nPacked:], minTextBytes)}
		switch k := r.IntN(100); {
		case d.lang == nil || k < 6:
			f.kind = markdownFile
		case k < 14:
			f.kind = jsonFile
		}
		f.path = path.Join(d.path, p.idents[r.IntN(len(p.idents))]+fmt.Sprint(i)+extOf(f))
		files = append(files, f)
	}
	for i := range files {
		files[i].n = uint64(i)
	}
	return files
}

// dir is one planned directory.
type dir struct {
	path string
	lang *language
}

// planDirs is n directories under the areas, each below a random earlier
// one of its area, at most six levels deep.
func planDirs(r *rand.Rand, p *pools, n int) []dir {
	var dirs []dir
	total := 0
	for _, a := range areas {
		dirs = append(dirs, dir{a.dir, a.lang})
		total += a.weight
	}
	seen := map[string]bool{}
	for len(dirs) < n {
		k := r.IntN(total)
		a := 0
		for ; k >= areas[a].weight; a++ {
			k -= areas[a].weight
		}
		var parents []dir
		for _, d := range dirs {
			if (d.path == areas[a].dir || strings.HasPrefix(d.path, areas[a].dir+"/")) && depth(d.path) < 6 {
				parents = append(parents, d)
			}
		}
		parent := parents[r.IntN(len(parents))]
		name := path.Join(parent.path, p.pkgs[r.IntN(len(p.pkgs))])
		if !seen[name] {
			seen[name] = true
			dirs = append(dirs, dir{name, parent.lang})
		}
	}
	return dirs
}

// depth is how many segments p has.
func depth(p string) int { return strings.Count(p, "/") + 1 }

// lognormal is n weights with a long tail, as file sizes have.
func lognormal(r *rand.Rand, n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Exp(1.1 * r.NormFloat64())
	}
	return w
}

// share is w's part of budget among all, at least least and at most 1 MiB.
func share(budget int64, w float64, all []float64, least int) int {
	sum := 0.0
	for _, v := range all {
		sum += v
	}
	return min(max(least, int(float64(budget)*w/sum)), 1<<20)
}

// extOf is the extension of a text file.
func extOf(f plannedFile) string {
	switch f.kind {
	case jsonFile:
		return ".json"
	case markdownFile:
		return ".md"
	}
	return f.lang.ext
}

// content is f's bytes in the repository generated with p from seed.
func content(f plannedFile, p *pools, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1<<32+f.n))
	w := &writer{r: r, p: p, b: make([]byte, 0, f.size+512)}
	switch f.kind {
	case sourceFile:
		return w.source(*f.lang, f.size)
	case jsonFile:
		return w.jsonDoc(f.size)
	case markdownFile:
		return w.markdown(f.size)
	case ignoreFile:
		return []byte(gitignore)
	}
	return randomBytes(seed, f.n, f.size)
}

// randomBytes is size incompressible bytes, from seed and n.
func randomBytes(seed, n uint64, size int) []byte {
	var key [32]byte
	for i := range 8 {
		key[i], key[8+i] = byte(seed>>(8*i)), byte(n>>(8*i))
	}
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// writeRepo writes the repository of s into dir, the ignored files
// included, and returns its plan.
func writeRepo(dir string, s repoSpec) ([]plannedFile, error) {
	files := planRepo(s)
	p := newPools(s.seed)
	made := map[string]bool{}
	for _, f := range files {
		if err := writeFile(dir, f.path, content(f, p, s.seed), made); err != nil {
			return nil, err
		}
	}
	for i, name := range ignoredFiles {
		if err := writeFile(dir, name, randomText(p, s.seed, uint64(i)), made); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// randomText is a small markdown text for ignored file i.
func randomText(p *pools, seed, i uint64) []byte {
	w := &writer{r: rand.New(rand.NewPCG(seed, 2<<32+i)), p: p}
	return w.markdown(2048)
}

// writeFile writes rel under dir, making its parents (made remembers them).
func writeFile(dir, rel string, b []byte, made map[string]bool) error {
	full := filepath.Join(dir, filepath.FromSlash(rel))
	if parent := filepath.Dir(full); !made[parent] {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return err
		}
		made[parent] = true
	}
	return os.WriteFile(full, b, 0o644)
}

// textFiles are the planned files a run may edit: source outside vendor/.
func textFiles(files []plannedFile) []plannedFile {
	return slices.DeleteFunc(slices.Clone(files), func(f plannedFile) bool {
		return f.kind != sourceFile || strings.HasPrefix(f.path, "vendor/")
	})
}

// paths are files' paths, in order.
func paths(files []plannedFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out
}
