package createos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Trees as repositories hold them, on the sim's real sandboxes: the same
// content many times, hard links, links that lead anywhere, and sandboxes
// and stores that are not what they should be.

// repeated is an archive with the same content many times: equal files
// (a second LICENSE), a file whose 1 MiB block repeats, empty and tiny
// files; edit varies one file.
func repeated(t *testing.T, edit string) []byte {
	t.Helper()
	license := bytes.Repeat([]byte("Permission is hereby granted, free of charge, to any person\n"), 30)
	block := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	files := map[string][]byte{
		"LICENSE":          license,
		"vendor/a/LICENSE": license,
		"vendor/b/LICENSE": license,
		"blocks.bin":       bytes.Repeat(block, 3),
		"empty":            nil,
		"tiny":             []byte("x"),
		"src/main.go":      []byte("package main\n" + edit),
		"src/pad.go":       bytes.Repeat([]byte("// pad\n"), 40_000),
	}
	return tarOf(t, files)
}

// deepName is a path of many levels whose whole is past PATH_MAX (4096),
// each name within NAME_MAX.
func deepName(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i := 0; b.Len() < 4200; i++ {
		fmt.Fprintf(&b, "%s-%03d/", strings.Repeat("d", 60), i)
	}
	return b.String() + "LICENSE"
}

// A path past PATH_MAX lands, or is refused, as the whole transfer does
// it: in the host's archive, extracted by its post-upload command.
func TestSyncIncrementalPathPastPathMaxIsWhole(t *testing.T) {
	archive := tarOf(t, map[string][]byte{"deep/" + deepName(t): bytes.Repeat([]byte("deep "), 100), "pad": bytes.Repeat([]byte("pad "), filesync.MinIncremental)})
	src := filepath.Join(t.TempDir(), "repo.tar")
	if err := os.WriteFile(src, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mode := range []string{filesync.SyncWhole, filesync.SyncAuto} {
		s := newSyncLease(t, mode)
		_, err := s.d.SyncIn(s.ctx(t), &handlers.SyncParams{BaseParams: s.bp, Lease: *s.l, Operations: []handlers.SyncOperation{{OperationID: "in",
			Files:              []handlers.SyncFileMapping{{SourcePath: src, TargetPath: "/paperclip-workspace/repo.tar", Kind: "file"}},
			PostUploadCommands: []handlers.PostUploadCommand{{Command: "tar -xf repo.tar"}}}}})
		got = append(got, fmt.Sprintf("%v\n%s", err, s.sandboxDir(t, "/paperclip-workspace")))
	}
	if got[0] != got[1] {
		t.Fatalf("whole:\n%s\nincremental:\n%s", got[0], got[1])
	}
}

// The same content twice, in a file mapping or across runs, keeps the sync
// incremental: three runs, each as the whole transfer's, and no fallback.
func TestSyncIncrementalRepeatedContentStaysIncremental(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	for i, edit := range []string{"", "// one\n", "// two\n"} {
		r := checkAgainstWhole(t, s, repeated(t, edit))
		if len(r.tree) < 8 {
			t.Fatalf("run %d: %d entries came out", i, len(r.tree))
		}
	}
	if strings.Contains(s.log.String(), "whole files") {
		t.Fatalf("the sync fell back:\n%s", s.log.String())
	}
}

// hostDir builds a host directory of every kind of link and repeat: a
// hard link, symlinks absolute and relative, out of the tree, dangling,
// to a directory, equal files, empty and tiny ones.
func hostDir(t *testing.T, root string) {
	t.Helper()
	big := bytes.Repeat([]byte("a line of a source file that repeats\n"), 12_000)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "src", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "src", "big.txt"), big, 0o644))
	must(os.WriteFile(filepath.Join(root, "src", "copy.txt"), big, 0o644))
	must(os.Link(filepath.Join(root, "src", "big.txt"), filepath.Join(root, "src", "sub", "hard.txt")))
	must(os.WriteFile(filepath.Join(root, "empty"), nil, 0o644))
	must(os.WriteFile(filepath.Join(root, "tiny"), []byte("x"), 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(root, "abs-out")))
	must(os.Symlink("../../outside", filepath.Join(root, "src", "rel-out")))
	must(os.Symlink("missing", filepath.Join(root, "dangling")))
	must(os.Symlink("src/sub", filepath.Join(root, "dirlink")))
	must(os.Symlink("big.txt", filepath.Join(root, "src", "inside")))
}

// sandboxDir lists a sandbox directory but the lease's runtime directory:
// each path's type, mode, link target and content hash.
func (s *syncLease) sandboxDir(t *testing.T, dir string) string {
	t.Helper()
	return s.sh(t, `cd `+dir+` && find . -path ./.paperclip-runtime -prune -o -printf '%y %m %p %l ' \( -type f -exec sh -c 'sha256sum < "$1"' _ {} \; -o -printf '\n' \) | LC_ALL=C sort`)
}

// A directory mapping with links of every kind syncs in as the whole
// transfer does, with or without following links (which refuses a link
// out of the tree), and stays incremental.
func TestSyncIncrementalDirectoryWithLinksIsWhole(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	hostDir(t, root)
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow=%v", follow), func(t *testing.T) {
			var trees []string
			var results []*handlers.SyncResult
			for _, mode := range []string{filesync.SyncWhole, filesync.SyncAuto} {
				s := newSyncLease(t, mode)
				op := handlers.SyncOperation{OperationID: "in", Files: []handlers.SyncFileMapping{
					{SourcePath: root, TargetPath: "/paperclip-workspace/dst", Kind: "directory", FollowSymlinks: follow},
				}}
				res, err := s.d.SyncIn(s.ctx(t), &handlers.SyncParams{BaseParams: s.bp, Lease: *s.l, Operations: []handlers.SyncOperation{op}})
				trees, results = append(trees, fmt.Sprintf("%v\n%s", err, s.sandboxDir(t, "/paperclip-workspace"))), append(results, res)
				if strings.Contains(s.log.String(), "whole files") {
					t.Fatalf("%s fell back:\n%s", mode, s.log.String())
				}
			}
			if trees[0] != trees[1] || !reflect.DeepEqual(results[0], results[1]) {
				t.Fatalf("whole and incremental differ:\n%s\n%+v\n---\n%s\n%+v", trees[0], results[0], trees[1], results[1])
			}
			if !follow && !strings.Contains(trees[0], "hard.txt") {
				t.Fatalf("the tree did not land:\n%s", trees[0])
			}
		})
	}
}

// A worker store too small for a mapping moves no more than the whole
// transfer; one that keeps nothing moves exactly the whole transfer's
// bytes.
func TestSyncIncrementalSmallStoreCostsNoMoreThanWhole(t *testing.T) {
	archive := repoTar(t, 600, nil)
	warm := repoTar(t, 600, map[int]string{9: "x"})
	whole := newSyncLease(t, filesync.SyncWhole)
	w := []run{whole.run(t, archive), whole.run(t, warm)}
	for _, bound := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprintf("bound=%d", bound), func(t *testing.T) {
			s := newSyncLease(t, filesync.SyncAuto)
			s.d.sync.MaxBytes = bound
			for i, archive := range [][]byte{archive, warm} {
				r := s.run(t, archive)
				if !reflect.DeepEqual(r.tree, w[i].tree) || r.sandbox != w[i].sandbox {
					t.Fatalf("run %d differs from the whole transfer's", i)
				}
				t.Logf("run %d: up %d down %d, whole up %d down %d", i, r.inT.up, r.outT.down, w[i].inT.up, w[i].outT.down)
				if bound == 0 && (r.inT != w[i].inT || r.outT != w[i].outT) {
					t.Errorf("run %d with no store: %+v %+v, whole %+v %+v", i, r.inT, r.outT, w[i].inT, w[i].outT)
				}
				if r.outT.down > w[i].outT.down {
					t.Errorf("run %d: %d bytes down, whole %d", i, r.outT.down, w[i].outT.down)
				}
			}
			if strings.Contains(s.log.String(), filesync.ReasonWorkerBad) {
				t.Errorf("a small store was taken for a corrupt one:\n%s", s.log.String())
			}
		})
	}
}

// The sandbox's store by what it is: a FIFO among its entries, the store a
// link to the workspace, ~/.cache a link into the workspace. Each sync
// finishes as the whole transfer's, nothing outside the store changes (the
// workspace keeps its mode and gains nothing), and the sync after it is
// incremental again where the store can be made.
func TestSyncIncrementalSandboxStoreByWhatItIs(t *testing.T) {
	for _, tc := range []struct {
		name, plant string
		again       bool // a store can be made afresh
	}{
		{"a fifo among the entries", `d=~/.cache/paperclip-createos-sync; for f in $d/??/*; do rm "$f"; mkfifo "$f"; done`, true},
		{"the store a link to the workspace", `rm -rf ~/.cache/paperclip-createos-sync && ln -s /paperclip-workspace ~/.cache/paperclip-createos-sync`, true},
		{"~/.cache a link into the workspace", `rm -rf ~/.cache && mkdir -p /paperclip-workspace/cache && ln -s /paperclip-workspace/cache ~/.cache`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSyncLease(t, filesync.SyncAuto)
			s.run(t, repoTar(t, 60, nil))
			s.sh(t, tc.plant)
			modeBefore := s.sh(t, `stat -c %a /paperclip-workspace`)
			archive := repoTar(t, 60, map[int]string{3: "x"})
			r := checkAgainstWhole(t, s, archive)
			if got := s.sh(t, `stat -c %a /paperclip-workspace`); got != modeBefore {
				t.Errorf("the workspace's mode went from %s to %s", modeBefore, got)
			}
			for name := range r.tree {
				if strings.HasPrefix(name, "tmp") || strings.Contains(name, "paperclip-createos-sync") || len(filepath.Base(name)) == 64 {
					t.Errorf("the store's %s came out of the workspace", name)
				}
			}
			if got := fallbacks(s, filesync.ReasonSandboxStore); got != 1 {
				t.Errorf("%d fallback lines for the store, want 1:\n%s", got, s.log.String())
			}
			s.log.Reset()
			r = checkAgainstWhole(t, s, repoTar(t, 60, map[int]string{3: "y"}))
			if tc.again && strings.Contains(s.log.String(), "whole files") {
				t.Errorf("the store made afresh was not used:\n%s", s.log.String())
			}
		})
	}
}

// A sandbox whose store lists more entries than the worker keeps is not
// downloaded; the mapping moves whole, and later ones send what the
// sandbox lacks rather than name it.
func TestSyncIncrementalOversizedIndexIsNotRead(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	s.run(t, repoTar(t, 60, nil))
	// A new worker must read the sandbox's index.
	s.d = New(WithHTTPClient(s.srv.Client()), WithPacer(s.d.pacer), WithGetenv(func(string) string { return "" }),
		WithCleanupDir(filepath.Join(t.TempDir(), "marks")), WithSync(filesync.SyncAuto, s.store, -1))
	t.Cleanup(func() { _ = s.d.Close(t.Context()) })
	liar := fmt.Sprintf(`#!/bin/bash
if [ "$3" = index ]; then printf 'PCINDEX\n' > "$4" && head -c %d /dev/zero >> "$4"; exit; fi
exec node "$@"
`, 32*(filesync.MaxHeld+1))
	s.put(t, "/root/liar", []byte(liar))
	s.sh(t, "chmod 755 /root/liar")
	s.d.sync.Node = "/root/liar"
	n := s.mark()
	checkAgainstWhole(t, s, repoTar(t, 60, map[int]string{3: "x"}))
	if got := fallbacks(s, filesync.ReasonIndex); got != 1 {
		t.Fatalf("%d fallback lines for the index, want 1:\n%s", got, s.log.String())
	}
	if tr := s.since(n); tr.down > 32<<20 {
		t.Fatalf("%d bytes came down: the index was downloaded", tr.down)
	}
}

// A sandbox store that lost entries the worker believes it holds (evicted:
// a mapping larger than the store) costs a try against the store's own
// index: what it lost is sent again, not everything.
func TestSyncIncrementalEvictedEntriesAreSentAlone(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	cold := s.run(t, repoTar(t, 300, nil))
	s.sh(t, `cd ~/.cache/paperclip-createos-sync && ls ??/* | awk 'NR % 4 == 0' | xargs rm -f`)
	r := checkAgainstWhole(t, s, repoTar(t, 300, map[int]string{7: "x"}))
	t.Logf("cold up %d, after a quarter was evicted up %d", cold.inT.up, r.inT.up)
	if r.inT.up*2 > cold.inT.up {
		t.Errorf("after a quarter of the sandbox's store went, %d bytes up where the cold run sent %d", r.inT.up, cold.inT.up)
	}
	if strings.Contains(s.log.String(), "whole files") {
		t.Errorf("the sync fell back:\n%s", s.log.String())
	}
}
