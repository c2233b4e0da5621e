// Package marks keeps the createos driver's cleanup marks: the sandboxes
// whose cleanup the driver could not confirm (a delete that failed or went
// unanswered, a lease whose process containment is unproven), on disk where
// the next worker finds them. The host starts the worker without HOME, so
// the store is under os.TempDir(), in a directory of the user's own, mode
// 0700. One file per sandbox, named by its account (Account: API origin and
// a hash of the key, never the key) and its id, holds the id and the
// origin; removing the last one removes the directory. Writes are atomic (a
// temporary file renamed), so concurrent workers read a whole mark or none.
package marks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
)

// DirPrefix names the cleanup marks directory under os.TempDir();
// the user's id follows. Once every cleanup is confirmed the directory is
// gone (make server-e2e and make chaos check that).
const DirPrefix = "paperclip-createos-cleanup-"

// markTempPrefix starts a mark being written; staleMarkTemp is when one
// left by a writer that died is removed.
const (
	markTempPrefix = ".tmp-"
	staleMarkTemp  = 10 * time.Minute
)

// errCleanupDir is the marks directory failing its checks (not a
// directory of this user's, mode 0700): it is left alone.
var errCleanupDir = errors.New("cleanup marks directory is not private to this user")

// Store is the store in one directory.
type Store struct{ dir string }

// mark is a mark file's content.
type mark struct {
	Origin  string `json:"origin"`
	Sandbox string `json:"sandbox"`
}

// markName is the file name of account's mark for sandbox id; both are
// checked first, so a name never leaves the directory.
func markName(account, id string) (string, error) {
	if len(account) != 32 || strings.Trim(account, "0123456789abcdef") != "" {
		return "", errors.New("invalid cleanup mark account")
	}
	if _, err := api.CheckID(id); err != nil {
		return "", err
	}
	return account + "." + id, nil
}

// open opens the directory, creating it when create is set; it reports
// fs.ErrNotExist when there is none. A directory that is not this user's
// own with mode 0700, or a link to one, is never used. Another worker may
// remove the directory, empty, and create it again while it is opened:
// then it is opened again.
func (m Store) open(create bool) (*os.Root, error) {
	var r *os.Root
	err := retryMoved(create, func() (err error) {
		r, err = m.openOnce(create)
		return err
	})
	return r, err
}

// openTries bounds the attempts (retryMoved) that another worker's removal
// of the empty directory can cost an open or a write.
const openTries = 8

// retryMoved runs try until it succeeds or fails for another reason than
// the directory changing under it (errDirMoved, or, when create, the
// directory gone: fs.ErrNotExist), at most openTries times. A directory
// that kept changing is errCleanupDir.
func retryMoved(create bool, try func() error) error {
	for n := 1; ; n++ {
		err := try()
		again := errors.Is(err, errDirMoved) || create && errors.Is(err, fs.ErrNotExist)
		if again && n < openTries {
			continue
		}
		if errors.Is(err, errDirMoved) {
			err = errCleanupDir
		}
		return err
	}
}

// errDirMoved is the directory opened not being the one checked.
var errDirMoved = errors.New("cleanup marks directory changed while it was opened")

func (m Store) openOnce(create bool) (*os.Root, error) {
	if create {
		if err := os.Mkdir(m.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	fi, err := os.Lstat(m.dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ownedBySelf(fi) {
		return nil, errCleanupDir
	}
	r, err := os.OpenRoot(m.dir)
	if err != nil {
		return nil, err
	}
	if got, err := r.Stat("."); err != nil || !os.SameFile(fi, got) {
		r.Close()
		return nil, errDirMoved
	}
	return r, nil
}

// Add records that sandbox id of account, at origin, needs cleanup.
func (m Store) Add(account, origin, id string) error {
	name, err := markName(account, id)
	if err != nil {
		return err
	}
	data, err := json.Marshal(mark{Origin: origin, Sandbox: id})
	if err != nil {
		return err
	}
	if len(data) > maxMark {
		return errMarkTooLarge
	}
	// Another worker may remove the directory, empty, between its creation
	// and the write; then it is created again (one loop: write opens the
	// directory once).
	return retryMoved(true, func() error { return m.write(name, data) })
}

// write opens (creating) the directory once and writes the mark name.
func (m Store) write(name string, data []byte) error {
	r, err := m.openOnce(true)
	if err != nil {
		return err
	}
	defer r.Close()
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := markTempPrefix + hex.EncodeToString(b[:])
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}

// Remove drops account's mark for id, and the directory once it is empty.
// No mark is no error.
func (m Store) Remove(account, id string) error {
	name, err := markName(account, id)
	if err != nil {
		return err
	}
	r, err := m.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = r.Remove(name)
	r.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_ = os.Remove(m.dir) // fails while another mark is there
	return nil
}

// Has reports whether account Has a mark for id.
func (m Store) Has(account, id string) bool {
	name, err := markName(account, id)
	if err != nil {
		return false
	}
	r, err := m.open(false)
	if err != nil {
		return false
	}
	defer r.Close()
	fi, err := r.Lstat(name)
	return err == nil && fi.Mode().IsRegular()
}

// List returns the sandbox ids account has marks for. A mark another
// worker removes meanwhile is skipped, and so is a file that is not a
// whole mark of its name (read only up to maxMark); a temporary file a
// dead writer left is removed.
func (m Store) List(account string) ([]string, error) {
	r, err := m.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	dir, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	entries, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, markTempPrefix) {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleMarkTemp {
				_ = r.Remove(name)
			}
			continue
		}
		id, ok := strings.CutPrefix(name, account+".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		mk, ok := readMark(r, name)
		if !ok || mk.Sandbox != id || !api.IDPattern.MatchString(id) {
			continue
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// maxMark bounds the bytes of a mark, written (Add) and read (List): an
// origin and an id in JSON need far less, and anything longer is not a
// mark this driver wrote.
const maxMark = 64 << 10

// errMarkTooLarge is a mark over maxMark: its origin is not one a mark
// can name.
var errMarkTooLarge = errors.New("cleanup mark too large: the API origin is too long")

// readMark reads the mark name in r, at most maxMark bytes of it; ok is
// false for a file that cannot be read, is longer, or is not a mark.
func readMark(r *os.Root, name string) (mk mark, ok bool) {
	f, err := r.Open(name)
	if err != nil {
		return mark{}, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMark+1))
	if err != nil || len(data) > maxMark || json.Unmarshal(data, &mk) != nil {
		return mark{}, false
	}
	return mk, true
}

// In is the store in dir.
func In(dir string) Store { return Store{dir: dir} }

// Default is the store of this user under os.TempDir():
// DirPrefix followed by the user's id.
func Default() Store {
	return Store{dir: filepath.Join(os.TempDir(), DirPrefix+strconv.Itoa(os.Getuid()))}
}

// Account names an account in mark file names: the first 32 hex digits of
// api.AccountID, never the key.
func Account(origin, keyDigest string) string { return api.AccountID(origin, keyDigest)[:32] }
