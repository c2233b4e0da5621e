package filesync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/delta"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Incremental moves mappings as delta streams (createos/delta): inbound,
// only the contents the sandbox's store lacks; outbound, only those the
// worker's store lacks. Whatever stops it (no node in the sandbox, a store
// entry missing or corrupt on either side) falls back to the whole
// transfer for that mapping, and Fallback is told why.
type Incremental struct {
	// Store is the company's bucket of the worker's store.
	Store delta.Store
	// Held is what the sandbox's store is believed to hold.
	Held *Held
	// Fallback reports that a mapping went whole, and why (the driver logs
	// each reason once per sandbox).
	Fallback func(reason string)
	// Node is the program that runs the helper in the sandbox, looked up
	// on its PATH; "" for node.
	Node string
}

// Fallback reasons.
const (
	ReasonNoHelper   = "the sandbox cannot run the sync helper (node)"
	ReasonSandboxBad = "the sandbox's store lost an entry twice in one mapping"
	ReasonWorkerBad  = "an entry of the worker's store was missing or corrupt"
)

// Held is what a sandbox's store is believed to hold, learnt from its
// index and from what was sent since. A wrong belief costs a retry, never
// a wrong file (the helper checks what it uses).
type Held struct {
	mu       sync.Mutex
	known    bool
	noHelper bool
	set      map[delta.Hash]struct{}
}

// NewHeld is the belief of a sandbox nothing is known of yet: its first
// incremental transfer reads its index.
func NewHeld() *Held { return &Held{} }

// NewHeldEmpty is the belief of a sandbox just created: nothing held.
func NewHeldEmpty() *Held { return &Held{known: true} }

func (h *Held) has(x delta.Hash) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.set[x]
	return ok
}

func (h *Held) add(xs []delta.Hash) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.set == nil {
		h.set = map[delta.Hash]struct{}{}
	}
	for _, x := range xs {
		h.set[x] = struct{}{}
	}
}

// learn replaces the belief with the sandbox's index.
func (h *Held) learn(index []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known, h.set = true, make(map[delta.Hash]struct{}, len(index)/32)
	for i := 0; i+32 <= len(index); i += 32 {
		h.set[delta.Hash(index[i:i+32])] = struct{}{}
	}
}

// forget drops the belief: the sandbox lost entries it was believed to
// hold, so nothing is named by reference until its index is read again.
func (h *Held) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known, h.set = false, nil
}

func (h *Held) isKnown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.known
}

func (h *Held) helperMissing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.noHelper
}

func (h *Held) markNoHelper() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noHelper = true
}

// Exit statuses a transfer script reports beside the helper's own.
const (
	exitNoHelper = 127 // env: node not found
	// exitNoRecipe: the outbound archive is made but no recipe of it.
	exitNoRecipe = 92
	// exitSmall: the outbound file is under MinIncremental; it comes
	// whole.
	exitSmall = 94
)

// MinIncremental is the smallest mapping that moves incrementally: under
// it, the helper's start in the sandbox (a node process, tens of
// milliseconds) costs more than the bytes it could save.
const MinIncremental = 256 << 10

// indexMagic starts the helper's index of its store.
const indexMagic = "PCINDEX\n"

// maxIndex bounds a sandbox store's index (2M entries).
const maxIndex = 64 << 20

// outLimits bound an outbound recipe: a million records per 512-byte
// header of the archive limit is more than any archive holds.
var outLimits = delta.Limits{Records: 1 << 24, Bytes: MaxDownloadBytes}

// errFallback is a mapping the incremental path hands to the whole one,
// and why ("" for a mapping too small to move otherwise).
type errFallback struct{ reason string }

func (e errFallback) Error() string { return e.reason }

// scratchNames are the sandbox files a transfer of one mapping may make:
// the scratch file, and beside it what an incremental transfer makes; the
// cleanup removes all of them.
func (t *Transfer) scratchNames(scratch string) []string {
	if t.Incremental == nil {
		return []string{scratch}
	}
	return []string{scratch, scratch + ".out", scratch + ".index", scratch + ".recipe", scratch + ".recipe.idx", scratch + ".want", scratch + ".pack"}
}

// inIncremental uploads one mapping as a delta stream. It returns
// errFallback when the whole transfer should carry the mapping instead.
func (t *Transfer) inIncremental(ctx context.Context, m handlers.SyncFileMapping, src *source, scratch string) (size int64, err error) {
	inc := t.Incremental
	if inc.Held.helperMissing() {
		return 0, errFallback{ReasonNoHelper}
	}
	if info, err := src.f.Stat(); err != nil {
		return 0, err
	} else if info.Size() < MinIncremental {
		// Whole, as it should: nothing to report. Its contents are kept all
		// the same, so a sync out finds what this one carried.
		_, _ = (&delta.Encoder{Keep: inc.Store}).Encode(io.Discard, src.f, info.Size())
		return 0, errFallback{}
	}
	landed := false // the landing command removed its scratch files itself
	defer func() {
		if !landed {
			t.removeStaged(ctx, m, scratch)
		}
	}()
	mode := src.mode
	if m.Mode != nil {
		mode = *m.Mode
	}
	if !inc.Held.isKnown() {
		if err := t.readIndex(ctx, scratch); err != nil {
			return 0, err
		}
	}
	for attempt := 0; ; attempt++ {
		code, sum, err := t.sendStream(ctx, m, src.f, scratch, mode, attempt == 0)
		if err != nil {
			return 0, err
		}
		switch code {
		case 0:
			landed = true
			inc.Held.add(sum.Contents)
			return sum.Size, nil
		case delta.ExitStoreMiss:
			inc.Held.forget()
			if attempt == 0 {
				continue
			}
			return 0, errFallback{ReasonSandboxBad}
		case exitNoHelper, delta.ExitBadInput:
			inc.Held.markNoHelper()
			return 0, errFallback{ReasonNoHelper}
		default:
			return 0, ErrTransferCommand
		}
	}
}

// readIndex learns what the sandbox's store holds: the helper lists it to
// a scratch file, which is downloaded. No helper marks the sandbox.
func (t *Transfer) readIndex(ctx context.Context, scratch string) error {
	command, err := helperScript(t.Incremental.Node, "index", scratch+".index", Workspace)
	if err != nil {
		return err
	}
	code, err := t.Run(ctx, command, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		t.Incremental.Held.markNoHelper()
		return errFallback{ReasonNoHelper}
	}
	tmp, err := t.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	local := filepath.Join(tmp, "index")
	if _, err := t.Client.DownloadFile(ctx, t.Sandbox, scratch+".index", local, 0o600); err != nil {
		return err
	}
	index, err := readBounded(local, maxIndex)
	if err != nil {
		return err
	}
	hashes, ok := bytes.CutPrefix(index, []byte(indexMagic))
	if !ok {
		return errListing
	}
	t.Incremental.Held.learn(hashes)
	return nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = delta.ErrListing
	}
	return b, err
}

// sendStream encodes src against what the sandbox holds (nothing when
// !byRef), uploads it and lands it; it returns the landing's exit status.
func (t *Transfer) sendStream(ctx context.Context, m handlers.SyncFileMapping, src *os.File, scratch string, mode uint32, byRef bool) (int, delta.Summary, error) {
	tmp, err := t.TempDir()
	if err != nil {
		return 0, delta.Summary{}, err
	}
	defer os.RemoveAll(tmp)
	enc := &delta.Encoder{Keep: t.Incremental.Store}
	if byRef {
		enc.Has = t.Incremental.Held.has
	}
	out, err := os.Create(filepath.Join(tmp, "stream"))
	if err != nil {
		return 0, delta.Summary{}, err
	}
	defer out.Close()
	sum, err := enc.EncodeFile(out, src)
	if err != nil {
		return 0, sum, err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return 0, sum, err
	}
	var command string
	if m.Kind == "file" {
		command, err = applyFileScript(t.Incremental.Node, m.TargetPath, scratch, mode)
	} else {
		command, err = applyDirectoryScript(t.Incremental.Node, m.TargetPath, scratch, mode)
	}
	if err != nil {
		return 0, sum, err
	}
	if _, err := t.Client.UploadFile(ctx, t.Sandbox, scratch, out); err != nil {
		return 0, sum, err
	}
	code, err := t.Run(ctx, command, nil)
	return code, sum, err
}

// outIncremental fetches an outbound mapping's source, which the command
// has put at scratch, by recipe: the helper describes it by reference, the
// worker asks for what its store lacks, then rebuilds it at data from its
// store. fellBack is set when the recipe could not be made or used and
// data must come whole from scratch.
func (t *Transfer) outIncremental(ctx context.Context, scratch, dir, data string) (fellBack string, err error) {
	inc := t.Incremental
	recipePath := filepath.Join(dir, "recipe")
	if _, err := t.Client.DownloadFile(ctx, t.Sandbox, scratch+".recipe", recipePath, 0o600); err != nil {
		return "", err
	}
	want, err := withFile(recipePath, func(f *os.File) (map[delta.Hash]int64, error) {
		return delta.Wants(f, inc.Store, outLimits)
	})
	if err != nil {
		return "", errListing
	}
	if len(want) > 0 {
		if reason, err := t.fetchPack(ctx, scratch, dir, want); reason != "" || err != nil {
			return reason, err
		}
	}
	_, err = withFile(recipePath, func(recipe *os.File) (struct{}, error) {
		out, err := os.OpenFile(data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return struct{}{}, err
		}
		err = delta.Rebuild(out, recipe, inc.Store)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return struct{}{}, err
	})
	switch {
	case errors.Is(err, castore.ErrMissing) || errors.Is(err, castore.ErrCorrupt):
		// Rebuild stopped at the first bad entry; every other one the
		// recipe names is checked now (castore removes what is bad), so
		// that the next sync finds the store mended.
		_, _ = withFile(recipePath, func(recipe *os.File) (struct{}, error) {
			return struct{}{}, delta.Check(recipe, inc.Store)
		})
		return ReasonWorkerBad, nil
	case errors.Is(err, delta.ErrRebuilt) || errors.Is(err, delta.ErrFormat):
		return "", errListing
	}
	return "", err
}

// fetchPack asks the sandbox for the contents in want and keeps them in
// the worker's store, each checked against its name and size.
func (t *Transfer) fetchPack(ctx context.Context, scratch, dir string, want map[delta.Hash]int64) (fellBack string, err error) {
	wantPath := filepath.Join(dir, "want")
	if err := os.WriteFile(wantPath, delta.WantList(want), 0o600); err != nil {
		return "", err
	}
	f, err := os.Open(wantPath)
	if err != nil {
		return "", err
	}
	_, err = t.Client.UploadFile(ctx, t.Sandbox, scratch+".want", f)
	f.Close()
	if err != nil {
		return "", err
	}
	command, err := helperScript(t.Incremental.Node, "pack", scratch, scratch+".recipe.idx", scratch+".want", scratch+".pack")
	if err != nil {
		return "", err
	}
	code, err := t.Run(ctx, command, nil)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return ReasonNoHelper, nil
	}
	packPath := filepath.Join(dir, "pack")
	if _, err := t.Client.DownloadFile(ctx, t.Sandbox, scratch+".pack", packPath, 0o600); err != nil {
		return "", err
	}
	_, err = withFile(packPath, func(f *os.File) (struct{}, error) {
		return struct{}{}, delta.TakePack(f, want, t.Incremental.Store)
	})
	if errors.Is(err, delta.ErrPack) || errors.Is(err, delta.ErrFormat) {
		return "", errListing
	}
	return "", err
}

func withFile[T any](path string, fn func(*os.File) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	return fn(f)
}
