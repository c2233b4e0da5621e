package syncbench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables of `make bench-sync`.
const (
	binEnv       = "BENCH_SYNC_BIN"          // the directory holding sandbox-plugin and createos-sim
	mbEnv        = "BENCH_SYNC_MB"           // the repository's size in MiB: 300
	filesEnv     = "BENCH_SYNC_FILES"        // its files: 20000
	seedEnv      = "BENCH_SYNC_SEED"         // what it is generated from: 1
	bandwidthEnv = "BENCH_SYNC_BANDWIDTH"    // the throttled half's link; set and empty: no throttled half
	repoEnv      = "BENCH_SYNC_REPO"         // a directory to copy and use instead of the generated repository
	treesEnv     = "BENCH_SYNC_TREES"        // make test-sync-trees: the directories it checks, separated by ':'
	maxFileEnv   = "BENCH_SYNC_MAX_FILE_MIB" // a copied tree's files larger than this are left out: 0, none
)

// defaultBandwidth is createos-sim's --bandwidth for the throttled half: a
// 50 Mbit/s uplink and a 200 Mbit/s downlink, a host on an ordinary
// office or cloud link.
const defaultBandwidth = "up:50M,down:200M"

// settings are what a run of the benchmark varies.
type settings struct {
	repo       repoSpec // the generated repository; its seed also orders a copied tree's edits
	repoDir    string   // the tree copied instead, "" for the generated repository
	maxFileMiB int      // a copied tree's files larger than this many MiB are left out; 0: none
	bandwidth  string   // "" when the throttled half is skipped
}

// parseSettings reads the variables through lookup (os.LookupEnv): an
// unset variable takes its default; BENCH_SYNC_BANDWIDTH set to nothing
// skips the throttled half.
func parseSettings(lookup func(string) (string, bool)) (settings, error) {
	s := settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, bandwidth: defaultBandwidth}
	for _, v := range []struct {
		name string
		to   *int
		min  int
	}{{mbEnv, &s.repo.mib, 1}, {filesEnv, &s.repo.files, 300}, {maxFileEnv, &s.maxFileMiB, 0}} {
		raw, ok := lookup(v.name)
		if !ok || strings.TrimSpace(raw) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < v.min {
			return s, fmt.Errorf("%s=%q: want a whole number of at least %d", v.name, raw, v.min)
		}
		*v.to = n
	}
	if raw, ok := lookup(seedEnv); ok && strings.TrimSpace(raw) != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want a whole number", seedEnv, raw)
		}
		s.repo.seed = n
	}
	if raw, ok := lookup(bandwidthEnv); ok {
		s.bandwidth = strings.TrimSpace(raw)
	}
	if raw, ok := lookup(repoEnv); ok && raw != "" {
		s.repoDir = raw
		return s, nil // the generated repository's size does not matter
	}
	if int64(s.repo.files)*minTextBytes > s.repo.bytes() {
		return s, fmt.Errorf("%s=%d files do not fit in %s=%d MiB", filesEnv, s.repo.files, mbEnv, s.repo.mib)
	}
	return s, nil
}

// parseTrees is BENCH_SYNC_TREES through lookup: the directories, at
// least one; every one must be a directory (a missing tree fails the
// check, it is not skipped). ok is false when the variable is not set.
func parseTrees(lookup func(string) (string, bool)) (trees []string, ok bool, err error) {
	raw, ok := lookup(treesEnv)
	if !ok {
		return nil, false, nil
	}
	for _, p := range strings.Split(raw, ":") {
		if p = strings.TrimSpace(p); p != "" {
			trees = append(trees, p)
		}
	}
	if len(trees) == 0 {
		return nil, true, fmt.Errorf("%s=%q names no directory", treesEnv, raw)
	}
	var bad []string
	for _, p := range trees {
		if fi, err := os.Stat(p); err != nil {
			bad = append(bad, err.Error())
		} else if !fi.IsDir() {
			bad = append(bad, p+" is not a directory")
		}
	}
	if len(bad) > 0 {
		return trees, true, fmt.Errorf("%s: a tree to check is missing: %s", treesEnv, strings.Join(bad, "; "))
	}
	return trees, true, nil
}
