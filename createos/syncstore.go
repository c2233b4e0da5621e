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

// maxFellFor bounds the fallback reasons remembered as logged.
const maxFellFor = 4 * filesync.MaxBeliefs

// syncState is the driver's part of the incremental sync.
type syncState struct {
	once    sync.Once
	store   *castore.Store // nil: whole transfers only
	mu      sync.Mutex
	held    filesync.Beliefs // by account and sandbox
	fellFor map[string]bool  // fallback reasons logged, by sandbox and reason
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
	h := s.held.Of(key, filesync.NewHeld)
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
				if s.fellFor == nil || len(s.fellFor) >= maxFellFor {
					s.fellFor = map[string]bool{}
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

// createdSandbox records that sandbox id was just created, not forked: its
// store is empty, and its first sync need not read its index.
func (d *Driver) createdSandbox(c *api.Client, id string) {
	if d.syncMode != SyncWhole {
		d.sync.held.Of(heldKey(c, id), filesync.NewHeldEmpty)
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
