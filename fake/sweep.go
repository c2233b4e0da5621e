package fake

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// A worker killed outright (SIGKILL, OOM) ends nothing: its commands'
// direct children die with it (Pdeathsig), but what they started lives
// on, reparented elsewhere, and its lease roots stay. So a booting driver
// sweeps its temp dir first: every root whose owner (ownerFile) is dead
// is ended — each process marked with a root no live worker owns
// (markerVar), with whatever it started, is terminated — and then
// removed. What a live worker owns is never touched: neither its roots
// nor the processes marked with them, nor anything below another live
// worker (a live worker is a subreaper, so all its leases' processes
// are, whatever their marker says), nor this worker and its ancestors. A
// root
// without an owner file is one a worker is creating right now, or whose
// worker died in that instant; an empty one older than ownerlessGrace is
// removed. If the processes cannot be confirmed gone, the roots stay for
// the next sweep.

// ownerlessGrace is how old an empty root without an owner file must be
// before a sweep removes it: its creator writes the file right after the
// directory.
const ownerlessGrace = time.Minute

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
	left := func() []tproc {
		all, _ := procfs.List()
		return found.leftovers(snapshot(all))
	}
	if !terminate(ctx, left) {
		log.Warn().Int("roots", len(found.dead)).Msg("fake sweep: processes of dead workers survived SIGKILL; their roots stay")
		return
	}
	for _, p := range found.dead {
		if err := os.RemoveAll(p); err != nil {
			log.Warn().Err(err).Msg("fake sweep: a dead worker's root could not be removed")
		}
	}
	if len(found.dead) > 0 {
		log.Info().Int("roots", len(found.dead)).Msg("fake sweep: ended what dead workers left")
	}
}

// roots is what a sweep found under a temp dir.
type roots struct {
	tmpDir    string
	live      map[string]bool // roots whose owner runs
	owners    []rootOwner     // those owners
	dead      []string        // roots whose owner is dead
	abandoned []string        // roots without an owner, older than ownerlessGrace
}

// findRoots reads the lease roots under tmpDir as of now.
func findRoots(tmpDir string, now time.Time) (*roots, error) {
	entries, err := os.ReadDir(tmpDir)
	if err != nil {
		return nil, err
	}
	r := &roots{tmpDir: filepath.Clean(tmpDir), live: map[string]bool{}}
	for _, e := range entries {
		if ok, _ := filepath.Match(rootPattern, e.Name()); !ok {
			continue
		}
		path := filepath.Join(r.tmpDir, e.Name())
		o, fi, err := ownerOf(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && fi != nil && now.Sub(fi.ModTime()) > ownerlessGrace:
			r.abandoned = append(r.abandoned, path)
		case err != nil: // not a root, or one whose owner cannot be read: not ours to judge
		case o.alive():
			r.live[path] = true
			r.owners = append(r.owners, o)
		default:
			r.dead = append(r.dead, path)
		}
	}
	return r, nil
}

// ownerOf reads the owner of the root directory at path; fi is the
// directory, when path is one.
func ownerOf(path string) (rootOwner, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return rootOwner{}, nil, errors.New("not a directory")
	}
	dir, err := os.OpenRoot(path)
	if err != nil {
		return rootOwner{}, nil, err
	}
	defer dir.Close()
	if held, err := dir.Stat("."); err != nil || !os.SameFile(held, fi) {
		return rootOwner{}, nil, errors.New("replaced while being read")
	}
	o, err := readOwner(dir)
	return o, fi, err
}

// leftovers is what of procs a sweep ends: each process attributed to a
// root of this temp dir that no live worker owns (markerVar), unless it is
// below another live owner, or is this worker or one of its ancestors.
// (What runs below this worker is spared by its roots being live: a
// process of a dead worker may be below it too, when this worker is the
// subreaper it was reparented to.)
func (r *roots) leftovers(procs []tproc) []tproc {
	attr := attribute(procs, nil)
	spared := spared(procs, r.owners)
	var out []tproc
	for _, p := range procs {
		m := attr[p.pid]
		if m != "" && filepath.Dir(m) == r.tmpDir && !r.live[m] && !spared[p.pid] {
			if ok, _ := filepath.Match(rootPattern, filepath.Base(m)); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// spared is the pids of procs a sweep never ends: the live owners, what
// runs below them, this process and its ancestors.
func spared(procs []tproc, owners []rootOwner) map[int]bool {
	byPID := make(map[int]tproc, len(procs))
	for _, p := range procs {
		byPID[p.pid] = p
	}
	isOwner := func(p tproc) bool {
		for _, o := range owners {
			if o.PID == p.pid && o.Start == p.start {
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
				out[p.pid] = true
				break
			}
			next, ok := byPID[q.ppid]
			if !ok {
				break
			}
			q = next
		}
	}
	out[os.Getpid()] = true
	for q, ok := byPID[os.Getppid()]; ok && !out[q.pid]; q, ok = byPID[q.ppid] {
		out[q.pid] = true
	}
	return out
}
