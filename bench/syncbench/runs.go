package syncbench

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// runPlan is one of a lease's runs: what changes in the host's working
// tree before it, left uncommitted so it rides the overlay tar.
type runPlan struct {
	name    string
	edits   int // source files changed, on top of the earlier runs' changes
	blobMiB int // a new untracked binary of this size, 0 for none
}

// runs are the three runs of a lease, in order.
var runs = []runPlan{
	{name: "1 cold"},
	{name: "2 warm: 1 file changed", edits: 1},
	{name: "3: 100 more changed, a 20 MiB binary added", edits: 100, blobMiB: 20},
}

// newBlobPath is where run 3's binary goes.
const newBlobPath = "assets/generated/model-cache.bin"

// applyRun makes run i's changes in repo: the next edits of editable
// (slash-separated paths, in a fixed order) in an order fixed by seed,
// each a comment line inserted mid-file, and the run's binary. It returns
// the bytes of the files it wrote.
func applyRun(repo string, editable []string, i int, seed uint64) (int64, error) {
	order := editOrder(len(editable), seed)
	first := 0
	for _, r := range runs[:i] {
		first += r.edits
	}
	r := runs[i]
	if first+r.edits > len(order) {
		return 0, fmt.Errorf("run %s edits %d files; the repository has %d editable ones", r.name, first+r.edits, len(order))
	}
	var wrote int64
	for k, n := range order[first : first+r.edits] {
		size, err := insertLine(filepath.Join(repo, filepath.FromSlash(editable[n])), fmt.Sprintf("// edited by run %s (%d)\n", r.name, k))
		if err != nil {
			return wrote, err
		}
		wrote += size
	}
	if r.blobMiB > 0 {
		made := map[string]bool{}
		wrote += int64(r.blobMiB) << 20
		return wrote, writeFile(repo, newBlobPath, randomBytes(seed, 0xb10b, r.blobMiB<<20), made)
	}
	return wrote, nil
}

// editOrder is the order in which the runs edit n editable files: a
// permutation fixed by seed.
func editOrder(n int, seed uint64) []int {
	return rand.New(rand.NewPCG(seed, 0xed17)).Perm(n)
}

// insertLine inserts line after the line end nearest the middle of file p
// and returns the file's new size.
func insertLine(p, line string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	at := len(b)
	if i := bytes.IndexByte(b[len(b)/2:], '\n'); i >= 0 {
		at = len(b)/2 + i + 1
	}
	out := make([]byte, 0, len(b)+len(line))
	out = append(append(append(out, b[:at]...), line...), b[at:]...)
	return int64(len(out)), os.WriteFile(p, out, 0o644)
}
