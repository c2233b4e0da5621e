package fake

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/synccopy"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// A login's HOME is its session home, sessions.SessionHomeRoot/<uuid>, on
// this machine: the fake's sandbox is the worker's machine. The root is
// created 0700 when missing and must be a real directory of this user
// that no other user can change; the home is created 0700, or, when it is
// there already, must be a directory of this user (its mode is set to
// 0700). Nothing is followed: a symbolic link at either is refused. The
// lease that opened a login on a home holds it — no other lease of the
// driver may use it — and deletes it when the lease is removed (teardown
// with remove), through a handle of the root: the credentials the CLI
// wrote do not outlive the lease. A root this driver created goes too
// once no login home is left in it (dropHomeRoot): on a machine whose
// users take turns (make server-e2e's server user, then the tests as
// root) another user's empty root would refuse every later login.

// claimHome prepares home for a login of l and records it as l's, unless
// another lease holds it. It runs under d.mu, so that two leases cannot
// claim one home at once.
func (d *Driver) claimHome(l *lease, home string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range d.leases {
		if o != l && o.hasHome(home) {
			return errSessionHomeInUse(home)
		}
	}
	made, err := prepareHome(home)
	d.madeHomeRoot = d.madeHomeRoot || made
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.homes == nil {
		l.homes = map[string]struct{}{}
	}
	l.homes[home] = struct{}{}
	l.mu.Unlock()
	return nil
}

func (l *lease) hasHome(home string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.homes[home]
	return ok
}

// prepareHome makes home, a valid session home, ready for a login. made
// reports that it created the root. Another worker of this user may
// remove an empty root between its creation and the home's (its
// dropHomeRoot): the home is then made again in a new root, a few times.
func prepareHome(home string) (made bool, err error) {
	for range 3 {
		m, err := prepareHomeOnce(home)
		made = made || m
		if !errors.Is(err, errRootGone) {
			return made, err
		}
	}
	return made, fmt.Errorf("create session home %s: %w", home, errRootGone)
}

// errRootGone: the login root was removed while the home was being made.
var errRootGone = errors.New("the login root was removed meanwhile")

// rootOpened, when set by tests, runs once prepareHomeOnce holds the root
// and before it makes the home.
var rootOpened func()

func prepareHomeOnce(home string) (made bool, err error) {
	root, made, err := openHomeRoot(true)
	if err != nil {
		return made, err
	}
	defer root.Close()
	if rootOpened != nil {
		rootOpened()
	}
	leaf := filepath.Base(home)
	if err := root.Mkdir(leaf, 0o700); errors.Is(err, fs.ErrNotExist) {
		return made, errRootGone
	} else if err != nil && !errors.Is(err, fs.ErrExist) {
		return made, fmt.Errorf("create session home %s: %w", home, synccopy.CleanErr(err))
	}
	fi, err := root.Lstat(leaf)
	if err != nil {
		return made, fmt.Errorf("look at session home %s: %w", home, synccopy.CleanErr(err))
	}
	if why := notOwnDir(fi); why != "" {
		return made, errSessionHomeNotOwn(home, why)
	}
	f, err := root.OpenFile(leaf, synccopy.OpenDirFlags, 0)
	if err != nil {
		return made, fmt.Errorf("open session home %s: %w", home, synccopy.CleanErr(err))
	}
	defer f.Close()
	if held, err := f.Stat(); err != nil || !os.SameFile(fi, held) {
		return made, errSessionHomeChanged(home)
	}
	if err := f.Chmod(0o700); err != nil {
		return made, fmt.Errorf("set the mode of session home %s: %w", home, synccopy.CleanErr(err))
	}
	return made, nil
}

// dropHomeRoot removes sessions.SessionHomeRoot when this driver created
// it and no login home is left in it: rmdir, which removes only an empty
// directory and never a link. A root that is not this user's directory,
// or not empty (a home of a lease still being torn down, whose own
// teardown comes back here), stays.
func (d *Driver) dropHomeRoot() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.madeHomeRoot {
		return
	}
	fi, err := os.Lstat(sessions.SessionHomeRoot)
	if errors.Is(err, fs.ErrNotExist) {
		d.madeHomeRoot = false
		return
	}
	if err != nil || notOwnDir(fi) != "" {
		return
	}
	if syscall.Rmdir(sessions.SessionHomeRoot) == nil {
		d.madeHomeRoot = false
	}
}

// openHomeRoot opens sessions.SessionHomeRoot, first creating it (0700)
// when create and it is missing (made); without create a missing root is
// nil.
func openHomeRoot(create bool) (root *os.Root, made bool, err error) {
	const name = sessions.SessionHomeRoot
	fi, err := os.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		if !create {
			return nil, false, nil
		}
		if err = os.Mkdir(name, 0o700); err == nil {
			made = true
		}
		if err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = os.Lstat(name)
		}
	}
	if create && errors.Is(err, fs.ErrNotExist) {
		return nil, made, errRootGone
	}
	if err != nil {
		return nil, made, fmt.Errorf("prepare %s: %w", name, synccopy.CleanErr(err))
	}
	why := notOwnDir(fi)
	if why == "" && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		why = "can be changed by other users (it is group- or world-writable and not sticky)"
	}
	if why != "" {
		return nil, made, errHomeRootUnfit(name, why)
	}
	root, err = os.OpenRoot(name)
	if create && errors.Is(err, fs.ErrNotExist) {
		return nil, made, errRootGone
	}
	if err != nil {
		return nil, made, fmt.Errorf("open %s: %w", name, synccopy.CleanErr(err))
	}
	if held, err := root.Stat("."); err != nil || !os.SameFile(fi, held) {
		root.Close()
		return nil, made, errHomeRootChanged(name)
	}
	return root, made, nil
}

// notOwnDir says why fi is not a directory of this user, "" when it is.
func notOwnDir(fi fs.FileInfo) string {
	switch st, ok := fi.Sys().(*syscall.Stat_t); {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case !fi.IsDir():
		return "is not a directory"
	case !ok || int(st.Uid) != os.Getuid():
		return "belongs to another user"
	}
	return ""
}

// removeHomes deletes the session homes l holds through a handle of their
// root: a symbolic link at a home is removed, never followed.
func (l *lease) removeHomes() error {
	l.mu.Lock()
	homes := slices.Collect(maps.Keys(l.homes))
	l.homes = nil
	l.mu.Unlock()
	if len(homes) == 0 {
		return nil
	}
	root, _, err := openHomeRoot(false)
	if err != nil || root == nil {
		return err
	}
	defer root.Close()
	for _, h := range homes {
		err = errors.Join(err, root.RemoveAll(filepath.Base(h)))
	}
	if err != nil {
		return fmt.Errorf("remove session homes: %w", err)
	}
	return nil
}
