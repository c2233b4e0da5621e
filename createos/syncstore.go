package createos

import (
	"context"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
)

// Incremental sync (createos/delta, filesync.Incremental): how it is
// chosen, the worker's store it keeps, and what each sandbox's store is
// believed to hold.

// Sync modes (SANDBOX_PLUGIN_CREATEOS_SYNC).
const (
	// SyncAuto moves mappings incrementally, each one whole where that
	// cannot be done (the default).
	SyncAuto = "auto"
	// SyncWhole moves every mapping whole, uncompressed, as one file.
	SyncWhole = "whole"
)

// Environment variables of the incremental sync.
const (
	SyncEnv     = "SANDBOX_PLUGIN_CREATEOS_SYNC"
	StoreDirEnv = "SANDBOX_PLUGIN_CREATEOS_STORE_DIR" // the worker's store; default castore.DefaultDir
	StoreMBEnv  = "SANDBOX_PLUGIN_CREATEOS_STORE_MB"  // its bound in MiB; default 2048, 0 for none
)

// WithSync sets the sync mode (SyncAuto, SyncWhole) and the worker's store
// directory and bound (dir "" for the default, maxBytes < 0 for the
// default); the defaults are the environment's.
func WithSync(mode, dir string, maxBytes int64) Option {
	return func(d *Driver) { d.syncMode, d.storeDir, d.storeMax = mode, dir, maxBytes }
}

// WithStore sets the worker's store directory and bound only (dir "" and
// maxBytes < 0 leave the environment's or the default).
func WithStore(dir string, maxBytes int64) Option {
	return func(d *Driver) {
		if dir != "" {
			d.storeDir = dir
		}
		if maxBytes >= 0 {
			d.storeMax = maxBytes
		}
	}
}

// maxHeld bounds how many sandboxes' beliefs are kept, and
// maxHeldHashes the hashes they hold together (8 bytes each: 16 MiB); past
// it, the beliefs used longest ago are forgotten (their sandboxes' indexes
// are read again when they sync next).
const (
	maxHeld       = 256
	maxHeldHashes = 2 * filesync.MaxHeld
)

// syncState is the driver's part of the incremental sync.
type syncState struct {
	once    sync.Once
	store   *castore.Store // nil: whole transfers only
	mu      sync.Mutex
	held    map[string]*filesync.Held // by account and sandbox
	used    map[string]uint64         // when each belief was last handed out
	clock   uint64
	fellFor map[string]bool // fallback reasons logged, by sandbox and reason
}

// incremental is the incremental transfer of one sync call on sandbox id
// of company, or nil when mappings go whole.
func (d *Driver) incremental(ctx context.Context, c *api.Client, id, company string) *filesync.Incremental {
	if d.syncMode == SyncWhole {
		return nil
	}
	st := d.openStore(ctx)
	if st == nil || !st.Keeps() {
		// A store that keeps nothing could only add a recipe's bytes to
		// the whole transfer's.
		return nil
	}
	key := heldKey(c, id)
	s := &d.sync
	h := s.heldOf(key, filesync.NewHeld)
	log := zerolog.Ctx(ctx)
	return &filesync.Incremental{
		Store:   st.Company(company),
		KeepMax: st.MaxContent(),
		Held:    h,
		Node:    d.syncNode,
		Fallback: func(reason string) {
			s.mu.Lock()
			first := !s.fellFor[key+"\x00"+reason]
			if first {
				if len(s.fellFor) >= maxHeld*4 {
					clear(s.fellFor)
				}
				s.fellFor[key+"\x00"+reason] = true
			}
			s.mu.Unlock()
			if first {
				log.Warn().Str("sandbox", id).Str("reason", reason).Msg("CreateOS sync moves whole files on this sandbox")
			}
		},
	}
}

func heldKey(c *api.Client, id string) string { return markAccount(c) + "/" + id }

// heldOf is the belief kept for key, made by mk when there is none.
// Handing one out first trims the others to maxHeldHashes in all, least
// recently used first.
func (s *syncState) heldOf(key string, mk func() *filesync.Held) *filesync.Held {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held, s.used, s.fellFor = map[string]*filesync.Held{}, map[string]uint64{}, map[string]bool{}
	}
	h, ok := s.held[key]
	if !ok {
		if len(s.held) >= maxHeld {
			s.dropOldestLocked(key)
		}
		h = mk()
		s.held[key] = h
	}
	s.clock++
	s.used[key] = s.clock
	s.trimLocked(key)
	return h
}

// trimLocked forgets the beliefs used longest ago, but keep's, while all
// of them hold more than maxHeldHashes.
func (s *syncState) trimLocked(keep string) {
	total := 0
	for _, h := range s.held {
		total += h.Len()
	}
	for total > maxHeldHashes {
		oldest := s.oldestLocked(keep, true)
		if oldest == "" {
			return
		}
		total -= s.held[oldest].Len()
		s.held[oldest].Forget()
	}
}

// oldestLocked is the key used longest ago other than keep (among those
// holding something, if holding), or "".
func (s *syncState) oldestLocked(keep string, holding bool) string {
	oldest := ""
	for k, h := range s.held {
		if k == keep || (holding && h.Len() == 0) {
			continue
		}
		if oldest == "" || s.used[k] < s.used[oldest] {
			oldest = k
		}
	}
	return oldest
}

// dropOldestLocked removes the belief used longest ago other than keep.
func (s *syncState) dropOldestLocked(keep string) {
	if k := s.oldestLocked(keep, false); k != "" {
		delete(s.held, k)
		delete(s.used, k)
	}
}

// createdSandbox records that sandbox id was just created, not forked: its
// store is empty, and its first sync need not read its index.
func (d *Driver) createdSandbox(c *api.Client, id string) {
	if d.syncMode != SyncWhole {
		d.sync.heldOf(heldKey(c, id), filesync.NewHeldEmpty)
	}
}

// openStore opens the worker's store once; a store that cannot be opened
// is logged and leaves every sync whole.
func (d *Driver) openStore(ctx context.Context) *castore.Store {
	s := &d.sync
	s.once.Do(func() {
		dir, max := d.storeDir, d.storeMax
		var err error
		if dir == "" {
			dir, err = castore.DefaultDir()
		}
		if err == nil {
			s.store, err = castore.Open(dir, max)
		}
		if err != nil {
			// castore's errors name no host path.
			zerolog.Ctx(ctx).Warn().Str("error", err.Error()).Msg("CreateOS sync store unavailable: every sync moves whole files")
		}
	})
	return s.store
}

// syncSettings reads the environment's sync mode, store dir and bound.
func syncSettings(getenv func(string) string) (mode, dir string, maxBytes int64) {
	mode, dir, maxBytes = getenv(SyncEnv), getenv(StoreDirEnv), castore.DefaultMaxBytes
	if mb, err := strconv.ParseInt(getenv(StoreMBEnv), 10, 64); err == nil && mb >= 0 {
		maxBytes = mb << 20
	}
	if mode != SyncWhole {
		mode = SyncAuto
	}
	return mode, dir, maxBytes
}

// closeStore closes the worker's store, if it was opened.
func (d *Driver) closeStore() {
	if d.sync.store != nil {
		_ = d.sync.store.Close()
	}
}
