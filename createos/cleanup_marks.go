package createos

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/rs/zerolog"
)

// Cleanup marks are the sandboxes whose cleanup this driver could not
// confirm (a delete that failed or went unanswered, a lease whose process
// containment is unproven), kept on disk where the next worker finds them:
// the host starts the worker without HOME, so under os.TempDir(),
// in a directory of its own user, mode 0700. One file per sandbox, named by
// its account (API origin and a hash of the API key, never the key) and its
// id, holding the id and the origin. A confirmed delete (2xx or 404)
// removes the file, and the directory once it is empty; the next acquire
// on the account, or the host's destroy of the lease, finishes what a mark
// records. Writes are atomic (a temporary file renamed), so concurrent
// workers read a whole mark or none.

// CleanupDirPrefix names the cleanup marks directory under os.TempDir();
// the user's id follows. Once every cleanup is confirmed the directory is
// gone (make server-e2e and make chaos check that).
const CleanupDirPrefix = "paperclip-createos-cleanup-"

// markTempPrefix starts a mark being written; staleMarkTemp is when one
// left by a writer that died is removed.
const (
	markTempPrefix = ".tmp-"
	staleMarkTemp  = 10 * time.Minute
)

// errCleanupDir is the marks directory failing its checks (not a
// directory of this user's, mode 0700): it is left alone.
var errCleanupDir = errors.New("cleanup marks directory is not private to this user")

// WithCleanupDir keeps the driver's cleanup marks in dir instead of under
// os.TempDir() (tests give each driver its own).
func WithCleanupDir(dir string) Option { return func(d *Driver) { d.cleanupDir = dir } }

// cleanupMarks is the store in one directory.
type cleanupMarks struct{ dir string }

// marks is the driver's store.
func (d *Driver) marks() cleanupMarks {
	if d.cleanupDir != "" {
		return cleanupMarks{dir: d.cleanupDir}
	}
	return cleanupMarks{dir: filepath.Join(os.TempDir(), CleanupDirPrefix+strconv.Itoa(os.Getuid()))}
}

// markAccount names c's account in mark file names: 32 hex digits of the
// SHA-256 of the origin and the key's own SHA-256.
func markAccount(c *api.Client) string {
	b, _ := json.Marshal([]string{c.Origin(), c.KeyDigest()})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

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
func (m cleanupMarks) open(create bool) (*os.Root, error) {
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

func (m cleanupMarks) openOnce(create bool) (*os.Root, error) {
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

// add records that sandbox id of account, at origin, needs cleanup.
func (m cleanupMarks) add(account, origin, id string) error {
	name, err := markName(account, id)
	if err != nil {
		return err
	}
	data, err := json.Marshal(mark{Origin: origin, Sandbox: id})
	if err != nil {
		return err
	}
	// Another worker may remove the directory, empty, between its creation
	// and the write; then it is created again (one loop: write opens the
	// directory once).
	return retryMoved(true, func() error { return m.write(name, data) })
}

// write opens (creating) the directory once and writes the mark name.
func (m cleanupMarks) write(name string, data []byte) error {
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

// remove drops account's mark for id, and the directory once it is empty.
// No mark is no error.
func (m cleanupMarks) remove(account, id string) error {
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

// has reports whether account has a mark for id.
func (m cleanupMarks) has(account, id string) bool {
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

// list returns the sandbox ids account has marks for. A mark another
// worker removes meanwhile is skipped, and so is a file that is not a
// whole mark of its name; a temporary file a dead writer left is removed.
func (m cleanupMarks) list(account string) ([]string, error) {
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
		data, err := r.ReadFile(name)
		if err != nil {
			continue
		}
		var mk mark
		if json.Unmarshal(data, &mk) != nil || mk.Sandbox != id || !api.IDPattern.MatchString(id) {
			continue
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// markUnconfirmed records that sandbox id of c's account needs cleanup; a
// failure to record it is logged (the call's own error stands).
func (d *Driver) markUnconfirmed(ctx context.Context, c *api.Client, id string) {
	if !api.IDPattern.MatchString(id) {
		return
	}
	if err := d.marks().add(markAccount(c), c.Origin(), id); err != nil {
		zerolog.Ctx(ctx).Warn().Str("sandbox", id).Str("error", markError(err)).Msg("CreateOS could not record a sandbox whose cleanup is unconfirmed")
	}
}

// poison records that the command containment of scope, sandbox id of c's
// account, is unproven: in memory (scopes.poison: no new work, never kept
// warm) and on disk (markUnconfirmed), so a worker killed before the
// release still leaves the sandbox to the next acquire's cleanup.
func (d *Driver) poison(ctx context.Context, c *api.Client, scope, id string) {
	d.scopes.poison(scope)
	d.markUnconfirmed(ctx, c, id)
}

// leftover records that a session's process on scope, sandbox id of c's
// account, may still run: in memory (scopes.markLeftover: not kept warm,
// no resume) and on disk (markUnconfirmed), as poison does.
func (d *Driver) leftover(ctx context.Context, c *api.Client, scope, id string) {
	d.scopes.markLeftover(scope)
	d.markUnconfirmed(ctx, c, id)
}

// unmark drops the mark of sandbox id of c's account, if any.
func (d *Driver) unmark(ctx context.Context, c *api.Client, id string) {
	if err := d.marks().remove(markAccount(c), id); err != nil {
		zerolog.Ctx(ctx).Warn().Str("sandbox", id).Str("error", markError(err)).Msg("CreateOS could not remove the cleanup mark of a deleted sandbox")
	}
}

// marked reports whether sandbox id of c's account has a cleanup mark.
func (d *Driver) marked(c *api.Client, id string) bool {
	return d.marks().has(markAccount(c), id)
}

// markError says what went wrong with the marks directory without its
// path (no host path of ours in logs).
func markError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

// deleteSandbox deletes sandbox id: a delete it cannot confirm leaves a
// cleanup mark, a confirmed one (2xx or 404) removes it.
func (d *Driver) deleteSandbox(ctx context.Context, c *api.Client, id string) error {
	if err := c.Destroy(ctx, id); err != nil {
		d.markUnconfirmed(ctx, c, id)
		return err
	}
	d.unmark(ctx, c, id)
	return nil
}

// finishCleanup deletes the marked sandboxes of c's account, except keep
// and any this worker holds (deleteSandbox: a confirmed delete removes the
// mark, a failed one keeps it). Failures are logged, never
// returned: the caller's lease is good.
func (d *Driver) finishCleanup(ctx context.Context, c *api.Client, keep string) {
	log := zerolog.Ctx(ctx)
	ids, err := d.marks().list(markAccount(c))
	if err != nil {
		log.Warn().Str("error", markError(err)).Msg("CreateOS could not read the sandboxes whose cleanup is unconfirmed")
		return
	}
	for _, id := range ids {
		if id == keep || d.scopes.holds(id) {
			continue
		}
		if err := d.deleteSandbox(ctx, c, id); err != nil {
			log.Warn().Str("sandbox", id).Str("error", err.Error()).Msg("CreateOS could not delete a sandbox whose cleanup was unconfirmed")
			continue
		}
		log.Info().Str("sandbox", id).Msg("CreateOS deleted a sandbox whose cleanup was unconfirmed")
	}
}
