package filesync

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

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
	// KeepMax is the most the worker's store keeps of one transfer's
	// contents (castore.Store.MaxContent); what a transfer lacks beyond it
	// is held beside the rebuild for that transfer alone.
	KeepMax int64
}

// Fallback reasons: why a mapping moved whole. Each is logged once per
// sandbox; only ReasonNoHelper lasts, for helperRetry (the sandbox has no
// node, or its helper failed maxFailures times in a row), the others cost
// the one mapping.
const (
	ReasonNoHelper     = "the sandbox cannot run the sync helper (node)"
	ReasonHelperFailed = "the sandbox's sync helper failed on a mapping"
	ReasonSandboxBad   = "the sandbox's store lost entries three times in one mapping"
	ReasonSandboxStore = "the sandbox's store was not a plain directory of its own outside the workspace (a link, a special file, or inside a synced path); it was made afresh where it may be"
	ReasonIndex        = "the sandbox's store listed more entries than the worker keeps, or not whole ones"
	ReasonListing      = "the sandbox's listing for the transfer was past the worker's limits or not what it sent"
	ReasonWorkerBad    = "an entry of the worker's store was missing or corrupt"
)

// reasonWorkerDisk is why a mapping moved whole when the worker's own
// store failed: cause is castore's error, which names no path.
func reasonWorkerDisk(cause error) string {
	return "the worker's sync store on this machine failed (" + cause.Error() + "); free space there or set its directory with SANDBOX_PLUGIN_CREATEOS_STORE_DIR"
}

// Exit statuses a transfer script reports beside the helper's own.
const (
	exitNoHelper = 127 // env: node not found
	// exitNoRecipe: the outbound archive is made but no recipe of it.
	exitNoRecipe = 92
	// exitSmall: the outbound file is under MinIncremental; it comes
	// whole.
	exitSmall = 94
	// exitHelperFailed: the helper ran and failed on an outbound
	// mapping's recipe (its own status is not the script's).
	exitHelperFailed = 96
	// exitIndexTooLarge: the sandbox store's index is past maxIndex; it
	// is not downloaded.
	exitIndexTooLarge = 97
)

// MinIncremental is the smallest mapping that moves incrementally: under
// it, the helper's start in the sandbox (a node process, tens of
// milliseconds) costs more than the bytes it could save.
const MinIncremental = 256 << 10

// indexMagic starts the helper's index of its store.
const indexMagic = "PCINDEX\n"

// maxIndex bounds a sandbox store's index: MaxHeld hashes.
const maxIndex = len(indexMagic) + 32*MaxHeld

// outLimits bound an outbound recipe (delta.DefaultLimits, with the
// download bound).
var outLimits = delta.Limits{Records: delta.DefaultLimits.Records, Bytes: MaxDownloadBytes, Contents: delta.DefaultLimits.Contents}

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

// helperCode is what a helper's exit status (not 0) means for a mapping:
// which fallback, and whether it lasts.
func (inc *Incremental) helperCode(code int) errFallback {
	switch code {
	case exitNoHelper:
		inc.Held.markNoHelper()
		return errFallback{ReasonNoHelper}
	case delta.ExitStoreBad:
		// The helper made the store afresh: it holds nothing.
		inc.Held.reset(nil)
		return errFallback{ReasonSandboxStore}
	case exitIndexTooLarge:
		inc.Held.reset(nil)
		return errFallback{ReasonIndex}
	}
	if inc.Held.helperFailed() {
		return errFallback{ReasonNoHelper}
	}
	return errFallback{ReasonHelperFailed}
}

// inIncremental uploads one mapping as a delta stream. It returns
// errFallback when the whole transfer should carry the mapping instead.
func (t *Transfer) inIncremental(ctx context.Context, m handlers.SyncFileMapping, src *source, scratch string) (size int64, err error) {
	inc := t.Incremental
	if inc.Held.helperMissing() {
		return 0, errFallback{ReasonNoHelper}
	}
	if err := inc.wholeIfSmall(src); err != nil {
		return 0, err
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
	// A content named but gone from the sandbox's store (evicted: a
	// mapping larger than the store; or spoiled, and removed by the
	// helper) costs a second try against the store's own index, then a
	// third naming nothing, then the whole transfer.
	for attempt := 0; ; attempt++ {
		code, sum, err := t.sendStream(ctx, m, src.f, scratch, mode, attempt < 2)
		if err != nil {
			return 0, err
		}
		switch code {
		case 0:
			landed = true
			inc.Held.helperWorked()
			inc.Held.add(sum.Contents)
			return sum.Size, nil
		case delta.ExitStoreMiss:
			inc.Held.forget()
			switch attempt {
			case 0:
				if err := t.readIndex(ctx, scratch); err != nil {
					return 0, err
				}
				continue
			case 1:
				continue
			}
			return 0, errFallback{ReasonSandboxBad}
		default:
			// The landing's own commands (mkdir, chmod, mv, tar) fail the
			// same way whole, where the whole path reports them.
			return 0, inc.helperCode(code)
		}
	}
}

// wholeIfSmall is errFallback{} (whole, with nothing to report) for a
// source under MinIncremental, whose contents it keeps all the same, so a
// sync out finds what this one carried.
func (inc *Incremental) wholeIfSmall(src *source) error {
	info, err := src.f.Stat()
	if err != nil {
		return err
	}
	if info.Size() < MinIncremental {
		_, _ = (&delta.Encoder{Keep: inc.Store}).Encode(io.Discard, src.f, info.Size())
		return errFallback{}
	}
	return nil
}

// readIndex learns what the sandbox's store holds: the helper lists it to
// a scratch file, which is downloaded unless it is past maxIndex, and read
// as a stream.
func (t *Transfer) readIndex(ctx context.Context, scratch string) error {
	command, err := indexScript(t.Incremental.Node, scratch+".index")
	if err != nil {
		return err
	}
	code, err := t.Run(ctx, command, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return t.Incremental.helperCode(code)
	}
	tmp, err := t.tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	local := filepath.Join(tmp, "index")
	if _, err := t.Client.DownloadFile(ctx, t.Sandbox, scratch+".index", local, 0o600); err != nil {
		return err
	}
	_, err = withFile(local, func(f *os.File) (struct{}, error) {
		return struct{}{}, t.Incremental.Held.learn(io.LimitReader(f, int64(maxIndex)+1))
	})
	return err
}

// sendStream encodes src against what the sandbox holds (nothing when
// !byRef), uploads it and lands it; it returns the landing's exit status.
func (t *Transfer) sendStream(ctx context.Context, m handlers.SyncFileMapping, src *os.File, scratch string, mode uint32, byRef bool) (int, delta.Summary, error) {
	tmp, err := t.tempDir()
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
// worker asks for what its store lacks, then rebuilds it at data (in the
// landing) from its
// store and from what the pack brought. It is errFallback when the recipe
// could not be used and data must come whole from scratch: a listing past
// the limits or not what the sandbox sent costs that mapping a whole
// transfer, whose own checks then answer.
func (t *Transfer) outIncremental(ctx context.Context, scratch, data string) error {
	inc := t.Incremental
	// The recipe, the list, the pack and the spill are the worker's own
	// temp files (TempDir: a dead worker's are swept); only the rebuilt
	// file is beside the target.
	dir, err := t.tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	recipePath := filepath.Join(dir, "recipe")
	if _, err := t.Client.DownloadFile(ctx, t.Sandbox, scratch+".recipe", recipePath, 0o600); err != nil {
		return err
	}
	want, err := withFile(recipePath, func(f *os.File) (*delta.Wanted, error) {
		return delta.Wants(f, inc.Store, outLimits)
	})
	if err != nil {
		return outError(err)
	}
	recipeSize, err := fileSize(recipePath)
	if err != nil {
		return err
	}
	// A pack that, with the recipe, may come to more than the whole file
	// is not asked for: the file comes whole.
	if recipeSize+want.Bytes+packOverhead(want) >= want.Out {
		return errFallback{}
	}
	var spill *os.File
	if want.Len() > 0 {
		if spill, err = os.OpenFile(filepath.Join(dir, "spill"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return err
		}
		defer spill.Close()
		if err := t.fetchPack(ctx, scratch, dir, want, spill); err != nil {
			return err
		}
	}
	return t.rebuild(recipePath, data, want, spill)
}

// rebuild writes data from the recipe at recipePath, the worker's store
// and spill (what the pack brought that the store does not keep).
func (t *Transfer) rebuild(recipePath, data string, want *delta.Wanted, spill *os.File) error {
	inc := t.Incremental
	_, err := withFile(recipePath, func(recipe *os.File) (struct{}, error) {
		out, err := os.OpenFile(data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return struct{}{}, err
		}
		err = delta.Rebuild(out, recipe, inc.Store, want, spill)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return struct{}{}, err
	})
	if errors.Is(err, castore.ErrMissing) || errors.Is(err, castore.ErrCorrupt) {
		// Rebuild stopped at the first bad entry; every other one the
		// recipe names is checked now (castore removes what is bad), so
		// that the next sync finds the store mended.
		_, _ = withFile(recipePath, func(recipe *os.File) (struct{}, error) {
			return struct{}{}, delta.Check(recipe, inc.Store)
		})
		return errFallback{ReasonWorkerBad}
	}
	return outError(err)
}

// outError is err as an outbound mapping meets it: the sandbox's listing
// or pack refused, or the worker's store failing, move the mapping whole
// (errFallback); any other error ends the sync.
func outError(err error) error {
	switch {
	case errors.Is(err, delta.ErrListing), errors.Is(err, delta.ErrPack), errors.Is(err, delta.ErrRebuilt), errors.Is(err, delta.ErrFormat):
		return errFallback{ReasonListing}
	case errors.Is(err, castore.ErrDisk):
		return errFallback{reasonWorkerDisk(err)}
	}
	return err
}

// packOverhead is what a pack of want costs beyond its contents' bytes
// at most: a record's head each, and a frame's head per MaxFrame.
func packOverhead(want *delta.Wanted) int64 {
	return int64(want.Len())*41 + (want.Bytes/delta.MaxFrame+int64(want.Len())+1)*9 + int64(len(delta.Magic))
}

// fetchPack asks the sandbox for the contents in want and keeps them in
// the worker's store, or in spill when the store would not keep them all,
// each checked against its name and size.
func (t *Transfer) fetchPack(ctx context.Context, scratch, dir string, want *delta.Wanted, spill *os.File) error {
	wantPath := filepath.Join(dir, "want")
	if err := os.WriteFile(wantPath, want.List(), 0o600); err != nil {
		return err
	}
	f, err := os.Open(wantPath)
	if err != nil {
		return err
	}
	_, err = t.Client.UploadFile(ctx, t.Sandbox, scratch+".want", f)
	f.Close()
	if err != nil {
		return err
	}
	command, err := helperScript(t.Incremental.Node, "pack", scratch, scratch+".recipe.idx", scratch+".want", scratch+".pack")
	if err != nil {
		return err
	}
	code, err := t.Run(ctx, command, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return t.Incremental.helperCode(code)
	}
	packPath := filepath.Join(dir, "pack")
	if _, err := t.Client.DownloadFile(ctx, t.Sandbox, scratch+".pack", packPath, 0o600); err != nil {
		return err
	}
	_, err = withFile(packPath, func(f *os.File) (struct{}, error) {
		return struct{}{}, delta.TakePack(f, want, t.Incremental.Store, t.Incremental.KeepMax, spill)
	})
	if err != nil {
		return outError(err)
	}
	return os.Remove(packPath)
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
