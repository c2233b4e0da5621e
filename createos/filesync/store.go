package filesync

import (
	"context"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
)

// Sync modes (SyncEnv).
const (
	// SyncAuto moves mappings incrementally, each one whole where that
	// cannot be done (the default).
	SyncAuto = "auto"
	// SyncWhole moves every mapping whole, uncompressed, as one file.
	SyncWhole = "whole"
)

// Environment variables of the incremental sync (StoreFromEnv).
const (
	SyncEnv     = "SANDBOX_PLUGIN_CREATEOS_SYNC"
	StoreDirEnv = "SANDBOX_PLUGIN_CREATEOS_STORE_DIR" // the worker's store; default castore.DefaultDir
	StoreMBEnv  = "SANDBOX_PLUGIN_CREATEOS_STORE_MB"  // its bound in MiB; default 2048, 0 for none
)

// maxFellFor bounds the fallback reasons remembered as logged.
const maxFellFor = 4 * maxBeliefs

// Store is a worker's side of the incremental sync: how mappings move
// (Mode), the worker's content store (castore, opened on the first
// incremental sync), and what each sandbox's store is believed to hold.
// Set its exported fields before the first sync; they are read then. Safe
// for concurrent use.
type Store struct {
	// Mode is SyncAuto or SyncWhole; any other value is SyncAuto.
	Mode string
	// Dir is the worker's store directory; "" for castore.DefaultDir.
	Dir string
	// MaxBytes bounds it; 0 for no bound, below 0 for
	// castore.DefaultMaxBytes.
	MaxBytes int64
	// Node is the sandbox program that runs the sync helper; "" for node.
	Node string

	once    sync.Once
	cas     *castore.Store // nil: whole transfers only
	mu      sync.Mutex
	held    beliefs         // by the caller's key
	fellFor map[string]bool // fallback reasons logged, by key and reason
}

// StoreFromEnv is a Store set by getenv's SyncEnv, StoreDirEnv and
// StoreMBEnv: a bound that is no whole number of MiB at or above 0 is
// castore.DefaultMaxBytes.
func StoreFromEnv(getenv func(string) string) *Store {
	s := &Store{Mode: getenv(SyncEnv), Dir: getenv(StoreDirEnv), MaxBytes: -1}
	if mb, err := strconv.ParseInt(getenv(StoreMBEnv), 10, 64); err == nil && mb >= 0 {
		s.MaxBytes = mb << 20
	}
	return s
}

// whole reports whether every mapping moves whole by the mode.
func (s *Store) whole() bool { return s.Mode == SyncWhole }

// Incremental is the incremental transfer of one sync call on sandbox of
// company, whose store's belief is kept under key (a sandbox id is unique
// per account: the key names both); nil when mappings go whole: by the
// mode, or when the worker's store could not be opened or keeps nothing.
// Each fallback reason is logged once per key, through ctx's logger.
func (s *Store) Incremental(ctx context.Context, key, sandbox, company string) *Incremental {
	if s.whole() {
		return nil
	}
	st := s.open(ctx)
	if st == nil || !st.Keeps() {
		// A store that keeps nothing could only add a recipe's bytes to
		// the whole transfer's.
		return nil
	}
	log := zerolog.Ctx(ctx)
	return &Incremental{
		Store:   st.Company(company),
		KeepMax: st.MaxContent(),
		Held:    s.held.of(key, newHeld),
		Node:    s.Node,
		Fallback: func(reason string) {
			if s.firstFall(key, reason) {
				log.Warn().Str("sandbox", sandbox).Str("reason", reason).Msg("CreateOS sync moves whole files on this sandbox")
			}
		},
	}
}

// firstFall records that the mapping of key went whole for reason, and
// reports whether that is the first time it is recorded.
func (s *Store) firstFall(key, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key + "\x00" + reason
	if s.fellFor[k] {
		return false
	}
	if s.fellFor == nil || len(s.fellFor) >= maxFellFor {
		s.fellFor = map[string]bool{}
	}
	s.fellFor[k] = true
	return true
}

// Created records that the sandbox of key was just created, not forked:
// its store is empty, and its first sync need not read its index.
func (s *Store) Created(key string) {
	if !s.whole() {
		s.held.of(key, newHeldEmpty)
	}
}

// open opens the worker's store once; a store that cannot be opened is
// logged and leaves every sync whole.
func (s *Store) open(ctx context.Context) *castore.Store {
	s.once.Do(func() {
		dir, max := s.Dir, s.MaxBytes
		if max < 0 {
			max = castore.DefaultMaxBytes
		}
		var err error
		if dir == "" {
			dir, err = castore.DefaultDir()
		}
		if err == nil {
			s.cas, err = castore.Open(dir, max)
		}
		if err != nil {
			// castore's errors name no host path.
			zerolog.Ctx(ctx).Warn().Str("error", err.Error()).Msg("CreateOS sync store unavailable: every sync moves whole files")
		}
	})
	return s.cas
}

// Close closes the worker's store, if it was opened. Call it once no sync
// runs.
func (s *Store) Close() error {
	if s.cas == nil {
		return nil
	}
	return s.cas.Close()
}
