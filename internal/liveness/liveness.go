// Package liveness is the one rule by which a worker tells the temp
// directories a dead worker left from those of a live one: who made a
// directory (an owner file in it: pid, start time, boot), whether that
// worker still runs, and how such a directory is read and removed.
package liveness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
)

// A driver's temp directory holds an owner file naming the worker that
// made it, written right after the directory. A later worker removes the
// directory only when all of this holds: its name is one the driver makes
// (the driver's own test), it is a directory itself — no link is followed,
// neither to it nor to its owner file — owned by this user, and its owner
// file names a worker that does not run now: another boot, or no live
// process with that pid and start time. A directory without an owner file
// is one being made now, or whose maker died in that instant (Abandoned).

// Worker is a worker process, as an owner file records it: a pid, and the
// start time that tells it from a later process with the same pid, in the
// boot both were read in.
type Worker struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	Boot  string `json:"boot"`
}

// Self is this process as a Worker.
var Self = sync.OnceValues(func() (Worker, error) {
	start, _, err := Stat(os.Getpid())
	if err != nil {
		return Worker{}, fmt.Errorf("read this worker's start time: %w", err)
	}
	return Worker{PID: os.Getpid(), Start: start, Boot: BootID()}, nil
})

// Alive reports whether w runs now: the same boot, and a live process with
// w's pid and start time.
func (w Worker) Alive() bool {
	return w.PID > 0 && w.Boot == BootID() && Running(w.PID, w.Start)
}

// Running reports whether process pid, started at start (Stat), runs now:
// a zombie has exited.
func Running(pid int, start uint64) bool {
	s, zombie, err := Stat(pid)
	return err == nil && s == start && !zombie
}

// BootID names the running boot of the machine; "" when it cannot be read.
var BootID = sync.OnceValue(bootID)

// limit bounds what is read of an owner file.
const limit = 4 << 10

// Write records v — a Worker, or a struct that embeds one — as the owner
// file named file in dir: a new file, readable by this user only.
func Write(dir *os.Root, file string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := dir.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read reads the owner file named file in dir into v, never following a
// link and never blocking on whatever stands at its name. A missing file
// is fs.ErrNotExist.
func Read(dir *os.Root, file string, v any) error {
	f, err := dir.OpenFile(file, os.O_RDONLY|nonblock|noFollow, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", file)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}

// Of reads into v the owner file named file of the directory at path; fi
// is that directory, once path is found to be one of this user's. Missing
// path is fs.ErrNotExist with no fi; a directory without an owner file is
// fs.ErrNotExist with fi. Anything else at path — a link, a file, another
// user's directory, one replaced while it was read — is an error of its
// own, with no fi: not a directory this rule may judge.
func Of(path, file string, v any) (fi fs.FileInfo, err error) {
	dir, fi, err := open(path)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return fi, Read(dir, file, v)
}

// Abandoned reports whether fi, a directory of this user's without an
// owner file, was made long enough ago that its maker, which writes the
// owner file right after the directory, must have died in between.
func Abandoned(fi fs.FileInfo, now time.Time) bool {
	return now.Sub(fi.ModTime()) > OwnerlessGrace
}

// OwnerlessGrace is how old a directory without an owner file must be
// before Abandoned says so.
const OwnerlessGrace = time.Minute

// RemoveDir removes the directory at path, one of this user's, with all it
// holds, never through a link: its contents through a handle on the
// directory, then its name (os.Remove, which removes a link put there
// meanwhile as a link).
func RemoveDir(path string) error {
	dir, _, err := open(path)
	if err != nil {
		return err
	}
	defer dir.Close()
	self, err := dir.Open(".")
	if err != nil {
		return err
	}
	names, err := self.Readdirnames(-1)
	self.Close()
	for _, n := range names {
		err = errors.Join(err, dir.RemoveAll(n))
	}
	if err != nil {
		return err
	}
	return os.Remove(path)
}

// Errors of a path this rule does not judge.
var (
	errNotDir   = errors.New("not a directory")
	errNotOurs  = errors.New("owned by another user")
	errReplaced = errors.New("replaced while being read")
)

// open opens the directory at path, when it is a directory itself (no
// link) owned by this user; fi is it.
func open(path string) (*os.Root, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%s: %w", path, errNotDir)
	}
	if !ownedBySelf(fi) {
		return nil, nil, fmt.Errorf("%s: %w", path, errNotOurs)
	}
	dir, err := os.OpenRoot(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, errReplaced)
	}
	if held, err := dir.Stat("."); err != nil || !os.SameFile(held, fi) {
		dir.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, errReplaced)
	}
	return dir, fi, nil
}
