package syncbench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// benchRepo is the repository the runs go through: the host's working
// tree, committed, and the files the runs may edit.
type benchRepo struct {
	dir      string   // the working tree
	editable []string // slash-separated, in a fixed order
	label    string   // which tree it is, for the tables
}

// generatedRepo writes the repository of spec into dir and commits it.
func generatedRepo(ctx context.Context, dir string, spec repoSpec) (benchRepo, error) {
	start := time.Now()
	files, err := writeRepo(dir, spec)
	if err == nil {
		err = commitRepo(ctx, dir)
	}
	if err != nil {
		return benchRepo{}, fmt.Errorf("generate the repository: %w", err)
	}
	r := benchRepo{dir: dir, editable: paths(textFiles(files)),
		label: fmt.Sprintf("a generated repository of %d MiB and %d files (seed %d)", spec.mib, len(files), spec.seed)}
	fmt.Printf("bench-sync: %s, written and committed in %s\n", r.label, seconds(time.Since(start)))
	return r, nil
}

// copiedRepo copies the tree at src into dir (copyTree, files over
// maxFile bytes left out when it is above 0), commits it and finds the
// files the runs may edit.
func copiedRepo(ctx context.Context, src, dir string, maxFile int64) (benchRepo, error) {
	start := time.Now()
	st, err := copyTree(src, dir, maxFile)
	if err != nil {
		return benchRepo{}, fmt.Errorf("copy %s: %w", src, err)
	}
	copied := time.Since(start)
	if err := commitRepo(ctx, dir); err != nil {
		return benchRepo{}, fmt.Errorf("commit the copy of %s: %w", src, err)
	}
	editable, err := editableFiles(ctx, dir)
	if err != nil {
		return benchRepo{}, fmt.Errorf("the editable files of %s: %w", src, err)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return benchRepo{}, err
	}
	r := benchRepo{dir: dir, editable: editable, label: fmt.Sprintf("a copy of %s: %s; %d editable text files", abs, st, len(editable))}
	fmt.Printf("bench-sync: %s; copied in %s, committed in %s\n", r.label, seconds(copied), seconds(time.Since(start)-copied))
	return r, nil
}
