//go:build linux || darwin

package liveness

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// exited is a worker that ran in this boot and has exited: a child of the
// test, read before it was reaped.
func exited(t *testing.T) Worker {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, _, err := Stat(cmd.Process.Pid) // running or a zombie: not reaped yet
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("stat %v, wait %v", err, werr)
	}
	return Worker{PID: cmd.Process.Pid, Start: start, Boot: BootID()}
}

func TestAliveIsThePidItsStartAndTheBoot(t *testing.T) {
	me, err := Self()
	if err != nil || me.PID != os.Getpid() || me.Start == 0 || me.Boot == "" {
		t.Fatalf("Self() = %+v, %v", me, err)
	}
	reused, otherBoot, noPID := me, me, me
	reused.Start++
	otherBoot.Boot = "another boot"
	noPID.PID = 0
	for _, c := range []struct {
		name string
		w    Worker
		want bool
	}{
		{"this worker", me, true},
		{"its pid with another start (reused)", reused, false},
		{"its pid and start in another boot", otherBoot, false},
		{"no pid", noPID, false},
		{"a worker that exited", exited(t), false},
	} {
		if got := c.w.Alive(); got != c.want {
			t.Errorf("%s: Alive() = %v, want %v", c.name, got, c.want)
		}
	}
}

// dirWith makes dir holding an owner file content ("" for none).
func dirWith(t *testing.T, dir, content string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if content != "" {
		testkit.WriteFile(t, filepath.Join(dir, "owner"), content, 0o600)
	}
	return dir
}

func TestOfJudgesOnlyThisUsersDirectoriesWithoutFollowingLinks(t *testing.T) {
	tmp := t.TempDir()
	b, _ := json.Marshal(Worker{PID: 7, Start: 8, Boot: "b"})
	record := string(b)
	mustSymlink := func(target, p string) string {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	owned := dirWith(t, filepath.Join(tmp, "owned"), record)
	ownerless := dirWith(t, filepath.Join(tmp, "ownerless"), "")
	linkedOwner := dirWith(t, filepath.Join(tmp, "linked-owner"), "")
	mustSymlink(filepath.Join(owned, "owner"), filepath.Join(linkedOwner, "owner"))
	fifoOwner := dirWith(t, filepath.Join(tmp, "fifo-owner"), "")
	testkit.Fifo(t, fifoOwner, "owner")
	huge := dirWith(t, filepath.Join(tmp, "huge-owner"), `{"pid":7,"boot":"`+strings.Repeat("b", 2*limit)+`"}`)
	file := filepath.Join(tmp, "file")
	testkit.WriteFile(t, file, record, 0o600)
	cases := []ofCase{
		{"a directory with an owner file", owned, true, nil, Worker{PID: 7, Start: 8, Boot: "b"}},
		{"nothing there", filepath.Join(tmp, "missing"), false, fs.ErrNotExist, Worker{}},
		{"a directory without an owner file", ownerless, true, fs.ErrNotExist, Worker{}},
		{"a link to a directory", mustSymlink(owned, filepath.Join(tmp, "link")), false, errAny, Worker{}},
		{"a file", file, false, errAny, Worker{}},
		{"an owner file that is a link", linkedOwner, true, errAny, Worker{}},
		{"an owner file that is a FIFO", fifoOwner, true, errAny, Worker{}},
		{"an owner file past the bound", huge, true, errAny, Worker{}},
	}
	if os.Geteuid() == 0 {
		other := dirWith(t, filepath.Join(tmp, "other-user"), record)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, ofCase{"another user's directory", other, false, errAny, Worker{}})
	}
	for _, c := range cases {
		var w Worker
		fi, err := Of(c.path, "owner", &w)
		switch {
		case (fi != nil) != c.wantFI:
			t.Errorf("%s: fi %v, want one: %v", c.name, fi, c.wantFI)
		case c.wantErr == nil && err != nil, c.wantErr == fs.ErrNotExist && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("%s: %v, want %v", c.name, err, c.wantErr)
		case c.wantErr == errAny && (err == nil || errors.Is(err, fs.ErrNotExist)):
			t.Errorf("%s: %v, want an error of its own", c.name, err)
		case err == nil && w != c.wantOwner:
			t.Errorf("%s: owner %+v, want %+v", c.name, w, c.wantOwner)
		}
	}
}

// ofCase is a path Of reads and what it should answer.
type ofCase struct {
	name      string
	path      string
	wantFI    bool
	wantErr   error // nil: none; errAny: an error other than fs.ErrNotExist
	wantOwner Worker
}

// errAny stands for an error other than fs.ErrNotExist in a table.
var errAny = errors.New("any error")

func TestWriteRecordsAWorkerReadBack(t *testing.T) {
	tmp := t.TempDir()
	dir, err := os.OpenRoot(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	type record struct {
		Worker
		Root string `json:"root"`
	}
	me, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "owner", record{me, "/r"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "owner", record{me, "/r"}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second Write: %v, want fs.ErrExist", err)
	}
	var got record
	if _, err := Of(tmp, "owner", &got); err != nil || got != (record{me, "/r"}) {
		t.Errorf("read back %+v, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(tmp, "owner")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("owner file %v, %v; want mode 0600", fi, err)
	}
}

func TestRemoveDirNeverFollowsALink(t *testing.T) {
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside")
	precious := filepath.Join(outside, "precious")
	testkit.WriteFile(t, precious, "keep", 0o600)
	dead := dirWith(t, filepath.Join(tmp, "dead"), `{}`)
	testkit.WriteFile(t, filepath.Join(dead, "sub", "data"), "x", 0o600)
	for name, target := range map[string]string{"to-dir": outside, "to-file": precious, "sub/to-dir": outside} {
		if err := os.Symlink(target, filepath.Join(dead, name)); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}

	if err := RemoveDir(dead); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory is left: %v", err)
	}
	if err := RemoveDir(link); err == nil {
		t.Error("RemoveDir of a link succeeded")
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("the link was removed: %v", err)
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "keep" {
		t.Errorf("what the links named was touched: %q, %v", b, err)
	}
	if os.Geteuid() == 0 {
		other := dirWith(t, filepath.Join(tmp, "other-user"), `{}`)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := RemoveDir(other); err == nil {
			t.Error("RemoveDir of another user's directory succeeded")
		}
		if _, err := os.Lstat(filepath.Join(other, "owner")); err != nil {
			t.Errorf("another user's directory was emptied: %v", err)
		}
	}
}

func TestAbandonedIsOlderThanTheGrace(t *testing.T) {
	dir := t.TempDir()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if Abandoned(fi, fi.ModTime().Add(OwnerlessGrace)) {
		t.Error("a directory made OwnerlessGrace ago is abandoned")
	}
	if !Abandoned(fi, fi.ModTime().Add(OwnerlessGrace+time.Second)) {
		t.Error("a directory made past OwnerlessGrace is not abandoned")
	}
}
