package filesync

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/liveness"
)

// A worker killed outright (SIGKILL, OOM) leaves its host temp files: the
// archive directory of an inbound directory mapping it was syncing, the
// delta stream it was sending, the sandbox store's index it was reading
// (each an archiveDir, Transfer's default TempDir), as large as the
// mapping. Each such directory records the worker that made it
// (ownerFile), so a Sweeper removes, in the background, those whose worker
// is dead by internal/liveness's rule: only entries of the temp dir named
// exactly as archiveDir names them, directories of this user's reached
// without a link, whose owner does not run. A directory without an owner
// file is one a worker is making now, or whose worker died in that
// instant; an empty one liveness.Abandoned says is old enough is removed.
// A live worker's directory, this worker's included, is never touched.
//
// A Sweeper sweeps when it starts and again every sweepEvery while it
// runs: a worker that dies after this one started (two workers on one
// TMPDIR, or a restart that did not wait for the old one's end) is seen
// dead only by a later look. Close lets the first pass, and any pass
// begun, finish within its ctx: the host may start a worker only to serve
// one call (a destroy) and stop it at once, and a pass cut there removed
// nothing.

// ownerFile, in each archive directory, names the worker that made it.
const ownerFile = ".paperclip-createos-owner"

// archiveTempPattern names the host temp directory, in os.TempDir(), that
// an inbound directory mapping is packed in (archiveDir). A name of its
// own: a sweep looks for these and nothing else.
const archiveTempPattern = ".paperclip-createos-archive-"

// archiveDir makes a host temp directory of a transfer, in os.TempDir()
// (Transfer.TempDir's default), and records this worker as its owner, so
// that the next worker's sweep removes it if this one dies
// before it does. Without the record (this worker's start time
// unreadable) the sync goes on, and no sweep ever takes that directory
// for a dead worker's.
func archiveDir() (string, error) {
	dir, err := os.MkdirTemp("", archiveTempPattern)
	if err != nil {
		return "", err
	}
	_ = claim(dir)
	return dir, nil
}

// claim records this worker as the owner of the directory at path, which
// it has just made.
func claim(path string) error {
	me, err := liveness.Self()
	if err != nil {
		return err
	}
	dir, err := os.OpenRoot(path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return liveness.Write(dir, ownerFile, me)
}

// madeByArchiveDir reports whether name is one os.MkdirTemp makes from
// archiveTempPattern: the pattern, then the decimal digits of a random
// uint32.
func madeByArchiveDir(name string) bool {
	n, ok := strings.CutPrefix(name, archiveTempPattern)
	if !ok || n == "" || len(n) > 10 {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// leftover is what a sweep makes of an entry of the temp dir.
type leftover int

const (
	keep      leftover = iota // not a dead worker's: a live one's, another user's, a link, a name of another's
	deadOwner                 // an archive directory whose worker is dead: removed whole
	abandoned                 // an empty archive directory without an owner file, long made: removed while empty
)

// judge says what the entry name of tmpDir is, as of now.
func judge(tmpDir, name string, now time.Time) leftover {
	if !madeByArchiveDir(name) {
		return keep
	}
	var w liveness.Worker
	fi, err := liveness.Of(filepath.Join(tmpDir, name), ownerFile, &w)
	switch {
	case errors.Is(err, fs.ErrNotExist) && fi != nil && liveness.Abandoned(fi, now):
		return abandoned
	case err != nil, w.Alive():
		return keep
	}
	return deadOwner
}

// sweepTemp removes from tmpDir the archive directories of dead workers.
func sweepTemp(ctx context.Context, tmpDir string) {
	log := zerolog.Ctx(ctx)
	entries, err := os.ReadDir(tmpDir)
	if err != nil {
		log.Debug().Err(err).Msg("createos sweep: the temp dir cannot be read")
		return
	}
	now, removed := time.Now(), 0
	for _, e := range entries {
		if ctx.Err() != nil {
			return
		}
		path := filepath.Join(tmpDir, e.Name())
		switch judge(tmpDir, e.Name(), now) {
		case deadOwner:
			if err := liveness.RemoveDir(path); err != nil {
				log.Warn().Err(err).Msg("createos sweep: a dead worker's temp dir could not be removed")
				continue
			}
			removed++
		case abandoned:
			if os.Remove(path) == nil { // only while still empty
				removed++
			}
		}
	}
	if removed > 0 {
		log.Info().Int("dirs", removed).Msg("createos sweep: removed what dead workers left in the temp dir")
	}
}

// sweepEvery is how often a started Sweeper sweeps again: what a worker
// that died after this one started left waits at most this long. A pass
// reads the temp dir's names once and looks closer only at archiveDir's.
const sweepEvery = 5 * time.Minute

// Sweeper owns the sweeps of dead workers' archive directories that run
// in the background: Close stops them and waits for the pass in progress
// to end. The zero value is ready.
type Sweeper struct {
	every time.Duration // between passes; zero is sweepEvery

	mu     sync.Mutex
	closed bool
	stop   chan struct{}      // closed by Close: no pass begins after it
	cut    context.CancelFunc // ends the pass in progress: Close's ctx ended first
	done   chan struct{}      // closed when the sweeps are over; nil while none started
	passes int                // passes ended, for tests
}

// Start sweeps tmpDir in the background now and every s.every, unless
// s is closed or already started. The sweeps log through ctx's logger and
// outlive ctx.
func (s *Sweeper) Start(ctx context.Context, tmpDir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.done != nil {
		return
	}
	every := s.every
	if every <= 0 {
		every = sweepEvery
	}
	pctx, cut := context.WithCancel(context.WithoutCancel(ctx))
	stop, done := make(chan struct{}), make(chan struct{})
	s.stop, s.cut, s.done = stop, cut, done
	go func() {
		defer close(done)
		defer cut()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			sweepTemp(pctx, tmpDir)
			s.mu.Lock()
			s.passes++
			s.mu.Unlock()
			select {
			case <-stop:
				return
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			select {
			case <-stop: // Close came with the tick
				return
			default:
			}
		}
	}()
}

// Close lets the pass in progress, if any, end and waits for it; when ctx
// ends first, it cuts the pass and returns. No pass begins after it.
func (s *Sweeper) Close(ctx context.Context) {
	s.mu.Lock()
	if !s.closed && s.stop != nil {
		close(s.stop)
	}
	s.closed = true
	cut, done := s.cut, s.done
	s.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
		cut()
	}
}

// passCount is how many passes have ended.
func (s *Sweeper) passCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passes
}
