package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"iter"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The workspace of sync/createos/reused-git (reusedgit.go): a git
// repository of 25 MB (1268 files) made from a fixed seed, so every run syncs the
// same bytes. Its mix is a service's repository: Go-like sources in
// packages, Markdown docs, JSON test data, and a few binary assets (an
// image and a font that do not compress, a database file that does).
const (
	repoPackages        = 36
	repoFilesPerPackage = 30
	repoDocs            = 60
	repoTestdata        = 120
	repoMinBytes        = 20 << 20 // what the scenario claims: at least 20 MiB committed
)

// repoEditedFile is the tracked file the stub agent appends to in each run.
const repoEditedFile = "CHANGELOG.md"

// repoSeed fixes the repository's bytes.
var repoSeed = [32]byte{'p', 'a', 'p', 'e', 'r', 'c', 'l', 'i', 'p', '-', 'r', 'e', 'u', 's', 'e', 'd', '-', 'g', 'i', 't'}

// repoFiles is the repository's files, path and content, in a fixed order.
func repoFiles() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		src := rand.NewChaCha8(repoSeed)
		r := rand.New(src)
		fixed := []struct {
			path string
			data []byte
		}{
			{"README.md", markdown(r, "ledger service", 6<<10)},
			{repoEditedFile, []byte("# Changelog\n\n## v1.4.0\n\n- first release of the ledger service\n")},
			{".gitignore", []byte("*.log\n/tmp/\n")},
			{"go.mod", []byte("module example.com/ledger\n\ngo 1.26\n")},
		}
		for _, f := range fixed {
			if !yield(f.path, f.data) {
				return
			}
		}
		for p := range repoPackages {
			pkg := fmt.Sprintf("%s%d", pick(r, words), p)
			for i := range repoFilesPerPackage {
				if !yield(fmt.Sprintf("internal/%s/%s_%d.go", pkg, pick(r, words), i), goSource(r, pkg, 4<<10+r.IntN(20<<10))) {
					return
				}
			}
		}
		for i := range repoDocs {
			if !yield(fmt.Sprintf("docs/%02d-%s.md", i, pick(r, words)), markdown(r, pick(r, words), 4<<10+r.IntN(8<<10))) {
				return
			}
		}
		for i := range repoTestdata {
			if !yield(fmt.Sprintf("testdata/%s-%03d.json", pick(r, words), i), jsonData(r, 8<<10+r.IntN(8<<10))) {
				return
			}
		}
		for _, b := range []struct {
			path string
			size int
		}{{"assets/architecture.png", 2_500_000}, {"assets/fonts/inter.woff2", 600_000}, {"assets/screenshots/dashboard.png", 1_400_000}} {
			data := make([]byte, b.size)
			_, _ = src.Read(data)
			if !yield(b.path, data) {
				return
			}
		}
		yield("testdata/ledger.sqlite", database(r, 2_000_000))
	}
}

// writeRepo writes the repository into dir (which must not exist yet),
// commits it with a fixed author and date, and returns its HEAD and how
// many files and bytes it committed.
func writeRepo(ctx context.Context, dir string) (head string, files int, size int64, err error) {
	for path, data := range repoFiles() {
		full := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", 0, 0, err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return "", 0, 0, err
		}
		files++
		size += int64(len(data))
	}
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339)
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_COMMITTER_DATE="+date)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "ledger service v1.4.0"}} {
		if _, err := git(ctx, dir, env, args...); err != nil {
			return "", 0, 0, err
		}
	}
	head, err = git(ctx, dir, env, "rev-parse", "HEAD")
	return strings.TrimSpace(head), files, size, err
}

// git runs git in dir and returns its stdout.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// chownTree gives dir and everything under it to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

var words = strings.Fields(`account balance ledger entry posting journal currency amount
	settle reconcile invoice payment refund transfer batch cursor page token
	request reply stream buffer handle worker queue retry backoff limit window
	config store cache index shard replica snapshot audit event metric trace span`)

func pick(r *rand.Rand, from []string) string { return from[r.IntN(len(from))] }

// ident is a camel-case identifier of two or three words.
func ident(r *rand.Rand) string {
	s := pick(r, words)
	for range 1 + r.IntN(2) {
		w := pick(r, words)
		s += strings.ToUpper(w[:1]) + w[1:]
	}
	return s
}

func sentence(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = pick(r, words)
	}
	return strings.Join(ws, " ")
}

// goSource is a Go-like file of package pkg, about size bytes.
func goSource(r *rand.Rand, pkg string, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Package %s handles %s.\npackage %s\n\nimport (\n\t\"context\"\n\t\"errors\"\n\t\"fmt\"\n)\n\n", pkg, sentence(r, 5), pkg)
	for b.Len() < size {
		name, arg := ident(r), pick(r, words)
		fmt.Fprintf(&b, "// %s %s.\nfunc %s(ctx context.Context, %s int) (string, error) {\n", name, sentence(r, 6+r.IntN(8)), name, arg)
		for range 2 + r.IntN(8) {
			v := ident(r)
			fmt.Fprintf(&b, "\t%s, err := %s(ctx, %s+%d)\n\tif err != nil {\n\t\treturn \"\", fmt.Errorf(\"%s: %%w\", err)\n\t}\n\tif %s == \"\" {\n\t\treturn \"\", errors.New(\"no %s\")\n\t}\n",
				v, ident(r), arg, r.IntN(1000), sentence(r, 3), v, pick(r, words))
		}
		fmt.Fprintf(&b, "\treturn %q, nil\n}\n\n", sentence(r, 2))
	}
	return b.Bytes()
}

// markdown is a document about topic, about size bytes.
func markdown(r *rand.Rand, topic string, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The %s\n\n", topic)
	for b.Len() < size {
		fmt.Fprintf(&b, "## %s\n\n", strings.ToUpper(topic[:1])+topic[1:]+" "+pick(r, words))
		for range 2 + r.IntN(4) {
			fmt.Fprintf(&b, "The %s. %s, then %s.\n", sentence(r, 10+r.IntN(10)), strings.ToUpper(pick(r, words)), sentence(r, 8))
		}
		fmt.Fprintf(&b, "\n```go\nx, err := %s(ctx, %d)\n```\n\n", ident(r), r.IntN(100))
	}
	return b.Bytes()
}

// jsonData is a JSON array of records, about size bytes.
func jsonData(r *rand.Rand, size int) []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `  {"id": "%016x", "account": %q, "amount": %d.%02d, "currency": "EUR", "memo": %q}`,
			r.Uint64(), ident(r), r.IntN(100000), r.IntN(100), sentence(r, 4))
	}
	b.WriteString("\n]\n")
	return b.Bytes()
}

// database is a page-structured binary file of size bytes: 4 KiB pages,
// each with a header and records of random ids and amounts, zero-padded.
func database(r *rand.Rand, size int) []byte {
	const page = 4096
	out := make([]byte, size)
	for off := 0; off+page <= size; off += page {
		p := out[off : off+page]
		copy(p, "LEDGERPG")
		for i := 16; i+24 <= page*3/4; i += 24 {
			for j := range 16 {
				p[i+j] = byte(r.Uint32())
			}
			copy(p[i+16:], "EUR\x00")
		}
	}
	return out
}
