package syncbench

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment variables of `make bench-sync`.
const (
	binEnv       = "BENCH_SYNC_BIN"       // the directory holding sandbox-plugin and createos-sim
	mbEnv        = "BENCH_SYNC_MB"        // the repository's size in MiB: 300
	filesEnv     = "BENCH_SYNC_FILES"     // its files: 20000
	seedEnv      = "BENCH_SYNC_SEED"      // what it is generated from: 1
	bandwidthEnv = "BENCH_SYNC_BANDWIDTH" // the throttled half's link; set and empty: no throttled half
)

// defaultBandwidth is createos-sim's --bandwidth for the throttled half: a
// 50 Mbit/s uplink and a 200 Mbit/s downlink, a host on an ordinary
// office or cloud link.
const defaultBandwidth = "up:50M,down:200M"

// settings are what a run of the benchmark varies.
type settings struct {
	repo      repoSpec
	bandwidth string // "" when the throttled half is skipped
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
	}{{mbEnv, &s.repo.mib, 1}, {filesEnv, &s.repo.files, 300}} {
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
	if int64(s.repo.files)*minTextBytes > s.repo.bytes() {
		return s, fmt.Errorf("%s=%d files do not fit in %s=%d MiB", filesEnv, s.repo.files, mbEnv, s.repo.mib)
	}
	return s, nil
}
