package fake

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/liveness"
)

// A worker killed outright (SIGKILL, OOM) ends nothing: its commands'
// direct children die with it (Pdeathsig), but what they started lives
// on, reparented elsewhere, and its lease roots stay. So a booting driver
// sweeps its temp dir first: each root whose owner (ownerFile) is dead is
// ended — every process marked with it (proctree.MarkerVar), or with the path the
// owner file says it was created at (a command may have moved it), is
// terminated with whatever it started — and then removed. What a live
// worker owns is never touched: neither its roots nor the processes marked
// with them, nor anything below a live worker (a live worker is a
// subreaper, so all its leases' processes are, whatever their marker
// says), nor this worker and its ancestors. A root without an owner file
// is one a worker is creating right now, or whose worker died in that
// instant; an empty one that liveness.Abandoned says is old enough is
// removed. If the processes cannot be confirmed gone, the roots stay for
// the next sweep. Which root is a dead worker's is internal/liveness's rule
// (a directory of this user's, never a link, whose owner does not run);
// the names are the fake's own: a root a command renamed within the temp
// dir keeps the prefix and is still found.

// sweep ends what dead workers left under the driver's temp dir.
func (d *Driver) sweep(ctx context.Context) {
	log := zerolog.Ctx(ctx)
	found, err := findRoots(d.tmpDir, time.Now())
	if err != nil {
		log.Debug().Err(err).Msg("fake sweep: the temp dir cannot be read")
		return
	}
	for _, p := range found.abandoned {
		_ = os.Remove(p) // only while still empty
	}
	if len(found.dead) == 0 {
		return // no dead worker's root: no process to look for
	}
	left := func() []proctree.Proc {
		all, _ := proctree.List()
		return found.leftovers(proctree.Snapshot(all))
	}
	if !proctree.Terminate(ctx, killGrace, left) {
		log.Warn().Int("roots", len(found.dead)).Msg("fake sweep: processes of dead workers survived SIGKILL; their roots stay")
		return
	}
	for _, p := range found.dead {
		if err := liveness.RemoveDir(p); err != nil {
			log.Warn().Err(err).Msg("fake sweep: a dead worker's root could not be removed")
		}
	}
	if len(found.dead) > 0 {
		log.Info().Int("roots", len(found.dead)).Msg("fake sweep: ended what dead workers left")
	}
}

// roots is what a sweep knows of the lease roots under a temp dir.
type roots struct {
	tmpDir    string
	verdicts  map[string]verdict // by root path (a marker), as first read
	owners    []rootOwner        // the live owners met so far
	dead      []string           // roots under tmpDir whose owner is dead
	abandoned []string           // roots without an owner, older than liveness.OwnerlessGrace
}

// verdict is what a sweep makes of a lease root.
type verdict int

const (
	rootUnknown   verdict = iota // not a root of this user's, or one whose owner cannot be read: not ours to judge
	rootLive                     // its owner runs
	rootDead                     // its owner is dead
	rootMissing                  // nothing is there (a marker of a root removed)
	rootOwnerless                // a directory without an owner file
)

// findRoots reads the lease roots under tmpDir as of now.
func findRoots(tmpDir string, now time.Time) (*roots, error) {
	entries, err := os.ReadDir(tmpDir)
	if err != nil {
		return nil, err
	}
	r := &roots{tmpDir: filepath.Clean(tmpDir), verdicts: map[string]verdict{}}
	for _, e := range entries {
		if ok, _ := filepath.Match(rootPattern, e.Name()); !ok {
			continue
		}
		path := filepath.Join(r.tmpDir, e.Name())
		switch v, fi, o := r.judge(path); {
		case v == rootDead:
			r.dead = append(r.dead, path)
			r.moved(o.Root)
		case v == rootOwnerless && liveness.Abandoned(fi, now):
			r.abandoned = append(r.abandoned, path)
		}
	}
	return r, nil
}

// moved records that a dead root was created at path (its owner file
// says so), where a command may have moved it from: processes marked with
// path are a dead worker's too, unless a live root is there now.
func (r *roots) moved(path string) {
	if filepath.Dir(path) != r.tmpDir {
		return
	}
	if v, _, _ := r.judge(path); v == rootMissing || v == rootUnknown {
		r.verdicts[path] = rootDead
	}
}

// judge reads the root at path once and remembers what it is; fi is the
// directory (for rootOwnerless), o the owner read. A live owner joins
// r.owners.
func (r *roots) judge(path string) (v verdict, fi fs.FileInfo, o rootOwner) {
	if v, ok := r.verdicts[path]; ok && v != rootOwnerless {
		return v, nil, rootOwner{}
	}
	fi, err := liveness.Of(path, ownerFile, &o)
	v = rootUnknown
	switch {
	case errors.Is(err, fs.ErrNotExist) && fi == nil:
		v = rootMissing
	case errors.Is(err, fs.ErrNotExist):
		v = rootOwnerless
	case err != nil:
	case o.Alive():
		v = rootLive
		r.owners = append(r.owners, o)
	default:
		v = rootDead
	}
	r.verdicts[path] = v
	return v, fi, o
}

// leftovers is what of procs a sweep ends: each process attributed to a
// root of this temp dir whose owner is dead (proctree.MarkerVar), unless it is
// below a live owner, or is this worker or one of its ancestors. Roots are judged when first met, so that a worker that
// creates its first root while the sweep runs is seen live. (This worker
// is spared by its roots being live, not by its descendants: a process of
// a dead worker may be below it, when it is the subreaper that process
// was reparented to.)
func (r *roots) leftovers(procs []proctree.Proc) []proctree.Proc {
	attr := proctree.Attribute(procs, nil)
	ended := map[string]bool{}
	for _, m := range attr {
		if ok, _ := filepath.Match(rootPattern, filepath.Base(m)); ok && filepath.Dir(m) == r.tmpDir {
			v, _, _ := r.judge(m)
			ended[m] = v == rootDead
		}
	}
	spared := spared(procs, r.owners)
	var out []proctree.Proc
	for _, p := range procs {
		if ended[attr[p.PID]] && !spared[p.PID] {
			out = append(out, p)
		}
	}
	return out
}

// spared is the pids of procs a sweep never ends: the live owners, what
// runs below them, this process and its ancestors.
func spared(procs []proctree.Proc, owners []rootOwner) map[int]bool {
	byPID := make(map[int]proctree.Proc, len(procs))
	for _, p := range procs {
		byPID[p.PID] = p
	}
	isOwner := func(p proctree.Proc) bool {
		for _, o := range owners {
			if o.PID == p.PID && o.Start == p.Start {
				return true
			}
		}
		return false
	}
	out := map[int]bool{}
	for _, p := range procs {
		// Walk up from p; a live owner on the way spares p.
		for q, depth := p, 0; depth <= len(procs); depth++ {
			if isOwner(q) {
				out[p.PID] = true
				break
			}
			next, ok := byPID[q.PPID]
			if !ok {
				break
			}
			q = next
		}
	}
	out[os.Getpid()] = true
	for q, ok := byPID[os.Getppid()]; ok && !out[q.PID]; q, ok = byPID[q.PPID] {
		out[q.PID] = true
	}
	return out
}
