package delta

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
)

// memStore is a Store in memory that checks what it is given, as castore
// does.
type memStore struct {
	mu sync.Mutex
	m  map[Hash][]byte
}

func newMemStore() *memStore { return &memStore{m: map[Hash][]byte{}} }

func (s *memStore) Has(h Hash) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[h]
	return int64(len(b)), ok
}

func (s *memStore) Put(h Hash, r io.Reader, size int64) error {
	b, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return err
	}
	if int64(len(b)) != size || sha256.Sum256(b) != h {
		return castore.ErrMismatch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[h] = b
	return nil
}

func (s *memStore) CopyTo(w io.Writer, h Hash, size int64) error {
	s.mu.Lock()
	b, ok := s.m[h]
	s.mu.Unlock()
	if !ok || int64(len(b)) != size || sha256.Sum256(b) != h {
		return errors.New("missing or corrupt")
	}
	_, err := w.Write(b)
	return err
}

// sandbox runs the sandbox program (guest.Program) like the driver does,
// with HOME (the store's home) and the workspace in a temp dir of the
// test's.
type sandbox struct {
	t         *testing.T
	home, ws  string
	scratch   string
	lastError string
}

func newSandbox(t *testing.T) *sandbox {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed for the helper's tests (make setup installs it)")
	}
	d := t.TempDir()
	s := &sandbox{t: t, home: filepath.Join(d, "home"), ws: filepath.Join(d, "ws"), scratch: filepath.Join(d, "tmp")}
	for _, p := range []string{s.home, s.ws, s.scratch} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// helperLimit bounds one run of the helper in these tests: a helper that
// blocks (on a FIFO in its store, say) fails the test instead of hanging it.
const helperLimit = 30 * time.Second

// run runs the helper and returns its exit status; a helper still running
// after helperLimit is killed and fails the test.
func (s *sandbox) run(args ...string) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helperLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"-e", guest.Program}, args...)...)
	cmd.Env = []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH")}
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	s.lastError = stderr.String()
	if ctx.Err() != nil {
		s.t.Fatalf("helper %s did not finish within %v", args[0], helperLimit)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	s.t.Fatal(err)
	return -1
}

func (s *sandbox) path(name string) string { return filepath.Join(s.scratch, name) }

func (s *sandbox) store() string { return filepath.Join(s.home, ".cache", "paperclip-createos-sync") }

// storeEntries is the set of hashes the sandbox store holds.
func (s *sandbox) storeEntries() map[Hash]bool {
	out := map[Hash]bool{}
	if s.run("index", s.path("index"), s.ws) != 0 {
		s.t.Fatalf("index: %s", s.lastError)
	}
	b, err := os.ReadFile(s.path("index"))
	if err != nil {
		s.t.Fatal(err)
	}
	b, ok := bytes.CutPrefix(b, []byte("PCINDEX\n"))
	if !ok {
		s.t.Fatal("the index does not start with its magic")
	}
	for i := 0; i+32 <= len(b); i += 32 {
		out[Hash(b[i:i+32])] = true
	}
	return out
}

// testTar is an archive of files of mixed sizes, a directory, a symlink
// and an empty file; seed varies the contents.
func testTar(t testing.TB, seed uint64, files int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tw.WriteHeader(&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755}))
	for i := range files {
		n := []int{0, 10, 127, 128, 500, 513, 4096, 70_000, 1 << 20, 3<<20 + 17}[i%10]
		data := make([]byte, n)
		if i%3 == 0 {
			for j := range data {
				data[j] = byte(rng.IntN(256))
			}
		} else {
			copy(data, strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), n/10+1))
		}
		must(tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("src/f%03d", i), Mode: 0o644, Size: int64(n), Typeflag: tar.TypeReg}))
		_, err := tw.Write(data)
		must(err)
	}
	must(tw.WriteHeader(&tar.Header{Name: "src/link", Typeflag: tar.TypeSymlink, Linkname: "f001"}))
	must(tw.Close())
	return buf.Bytes()
}

// encode writes data as a stream file at path.
func encode(t *testing.T, e *Encoder, data []byte, path string) Summary {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, err := e.Encode(f, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func fileSize(t *testing.T, path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func TestApplyRebuildsByteIdentical(t *testing.T) {
	random := make([]byte, 5<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.IntN(256))
	}
	notTar := append([]byte("not a tar\n"), random...)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"archive", testTar(t, 1, 40)},
		{"empty", nil},
		{"not an archive", notTar},
		{"short", []byte("abc")},
		{"archive then garbage", append(testTar(t, 2, 12), random[:300_000]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			keep := newMemStore()
			cold := encode(t, &Encoder{Keep: keep}, tc.data, s.path("cold"))
			if got := s.run("apply", s.path("cold"), s.path("out1"), s.ws); got != 0 {
				t.Fatalf("apply cold: exit %d: %s", got, s.lastError)
			}
			assertFile(t, s.path("out1"), tc.data)
			held := s.storeEntries()
			for _, h := range cold.Contents {
				if !held[h] {
					t.Fatalf("the sandbox store lacks %x after a cold apply", h[:4])
				}
				if _, ok := keep.Has(h); !ok {
					t.Fatalf("the worker store lacks %x", h[:4])
				}
			}
			warm := encode(t, &Encoder{Has: func(h Hash) bool { return held[h] }}, tc.data, s.path("warm"))
			if len(warm.Contents) != 0 {
				t.Fatalf("warm sent %d contents, want 0", len(warm.Contents))
			}
			if got := s.run("apply", s.path("warm"), s.path("out2"), s.ws); got != 0 {
				t.Fatalf("apply warm: exit %d: %s", got, s.lastError)
			}
			assertFile(t, s.path("out2"), tc.data)
			if len(tc.data) > 1<<20 {
				if c, w := fileSize(t, s.path("cold")), fileSize(t, s.path("warm")); w*20 > c {
					t.Fatalf("warm stream %d bytes, cold %d: want under 5%%", w, c)
				}
			}
		})
	}
}

func assertFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, want %d, equal prefix %d", filepath.Base(path), len(got), len(want), commonPrefix(got, want))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestApplyMissingOrCorruptEntryExits91AndLeavesNoOutput(t *testing.T) {
	data := testTar(t, 3, 20)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"missing", func(t *testing.T, p string) { mustDo(t, os.Remove(p)) }},
		{"corrupt", func(t *testing.T, p string) {
			mustDo(t, os.WriteFile(p, bytes.Repeat([]byte{'x'}, int(fileSize(t, p))), 0o600))
		}},
		{"truncated", func(t *testing.T, p string) { mustDo(t, os.Truncate(p, fileSize(t, p)/2)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			encode(t, &Encoder{}, data, s.path("cold"))
			if got := s.run("apply", s.path("cold"), s.path("out1"), s.ws); got != 0 {
				t.Fatalf("apply: exit %d: %s", got, s.lastError)
			}
			held := s.storeEntries()
			var victim Hash
			for h := range held {
				victim = h
				break
			}
			tc.spoil(t, filepath.Join(s.store(), fmt.Sprintf("%x", victim[:1]), fmt.Sprintf("%x", victim[:])))
			encode(t, &Encoder{Has: func(h Hash) bool { return held[h] }}, data, s.path("warm"))
			if got := s.run("apply", s.path("warm"), s.path("out2"), s.ws); got != ExitStoreMiss {
				t.Fatalf("apply with a spoiled entry: exit %d, want %d: %s", got, ExitStoreMiss, s.lastError)
			}
			if _, err := os.Stat(s.path("out2")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a failed apply left its output: %v", err)
			}
			if s.storeEntries()[victim] {
				t.Fatal("the spoiled entry is still listed")
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestApplyRefusesBadStreams(t *testing.T) {
	s := newSandbox(t)
	data := testTar(t, 4, 10)
	encode(t, &Encoder{}, data, s.path("good"))
	good, err := os.ReadFile(s.path("good"))
	mustDo(t, err)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no magic", []byte("PCSYNC0\n")},
		{"truncated", good[:len(good)/2]},
		{"trailing bytes", append(append([]byte(nil), good...), good[len(Magic):]...)},
		{"flipped byte", flip(good, len(good)-20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustDo(t, os.WriteFile(s.path("bad"), tc.data, 0o600))
			if got := s.run("apply", s.path("bad"), s.path("out"), s.ws); got != ExitBadInput {
				t.Fatalf("exit %d, want %d: %s", got, ExitBadInput, s.lastError)
			}
			if _, err := os.Stat(s.path("out")); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a refused stream left its output")
			}
			// The Go reader refuses it too.
			if err := Decode(bytes.NewReader(tc.data), func(Record, io.Reader) error { return nil }); err == nil && tc.name != "flipped byte" {
				t.Fatal("Decode took it")
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func TestStoreInsideTheWorkspaceIsNotUsed(t *testing.T) {
	s := newSandbox(t)
	s.home = filepath.Join(s.ws, "home")
	mustDo(t, os.Mkdir(s.home, 0o700))
	data := testTar(t, 5, 10)
	encode(t, &Encoder{}, data, s.path("cold"))
	// The store would be in the workspace: nothing is made, the mapping
	// moves whole.
	if got := s.run("apply", s.path("cold"), s.path("out"), s.ws); got != ExitStoreBad {
		t.Fatalf("exit %d, want %d: %s", got, ExitStoreBad, s.lastError)
	}
	if _, err := os.Stat(s.path("out")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the helper left an output")
	}
	if _, err := os.Stat(s.store()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the helper made a store inside the workspace")
	}
}
