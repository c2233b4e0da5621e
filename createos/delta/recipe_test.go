package delta

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"testing"
)

var testLimits = Limits{Records: 1 << 20, Bytes: 1 << 30, Contents: 1 << 16}

// fetch is the worker's side of a sync out against the helper: recipe,
// wants, pack, rebuild; it returns the rebuilt bytes and how many contents
// were asked for.
func fetch(t *testing.T, s *sandbox, kind string, src []byte, st Store) ([]byte, int) {
	return fetchKeeping(t, s, kind, src, st, 1<<40)
}

// fetchKeeping is fetch with the store keeping wanted contents together
// up to keepMax bytes (the rest spilled).
func fetchKeeping(t *testing.T, s *sandbox, kind string, src []byte, st Store, keepMax int64) ([]byte, int) {
	t.Helper()
	mustDo(t, os.WriteFile(s.path("src"), src, 0o600))
	if got := s.run("recipe", kind, s.path("src"), s.path("recipe"), s.ws); got != 0 {
		t.Fatalf("recipe: exit %d: %s", got, s.lastError)
	}
	recipe, err := os.ReadFile(s.path("recipe"))
	mustDo(t, err)
	want, err := Wants(bytes.NewReader(recipe), st, testLimits)
	mustDo(t, err)
	var spill *os.File
	if want.Len() > 0 {
		mustDo(t, os.WriteFile(s.path("want"), want.List(), 0o600))
		if got := s.run("pack", s.path("src"), s.path("recipe")+".idx", s.path("want"), s.path("pack")); got != 0 {
			t.Fatalf("pack: exit %d: %s", got, s.lastError)
		}
		pack, err := os.Open(s.path("pack"))
		mustDo(t, err)
		defer pack.Close()
		spill, err = os.Create(s.path("spill"))
		mustDo(t, err)
		defer spill.Close()
		mustDo(t, TakePack(pack, want, st, keepMax, spill))
	}
	var out bytes.Buffer
	mustDo(t, Rebuild(&out, bytes.NewReader(recipe), st, want, spill))
	return out.Bytes(), want.Len()
}

func TestRecipeAndPackRebuildByteIdentical(t *testing.T) {
	s := newSandbox(t)
	st := newMemStore()
	data := testTar(t, 6, 40)
	got, asked := fetch(t, s, "tar", data, st)
	if !bytes.Equal(got, data) {
		t.Fatal("the rebuilt archive differs")
	}
	if asked == 0 {
		t.Fatal("a cold fetch asked for nothing")
	}
	got, asked = fetch(t, s, "tar", data, st)
	if !bytes.Equal(got, data) || asked != 0 {
		t.Fatalf("warm fetch: equal %v, asked %d, want 0", bytes.Equal(got, data), asked)
	}
	for _, n := range []int{0, 10, 1 << 20, 1<<20 + 1} {
		file := bytes.Repeat([]byte("z"), n)
		got, _ := fetch(t, s, "file", file, st)
		if !bytes.Equal(got, file) {
			t.Fatalf("file of %d bytes differs", n)
		}
	}
}

func TestRecipeRefusesWhatIsNoArchive(t *testing.T) {
	s := newSandbox(t)
	mustDo(t, os.WriteFile(s.path("src"), bytes.Repeat([]byte("not a tar "), 100), 0o600))
	if got := s.run("recipe", "tar", s.path("src"), s.path("recipe"), s.ws); got != ExitBadInput {
		t.Fatalf("exit %d, want %d", got, ExitBadInput)
	}
}

// stream builds a stream by hand: what a hostile sandbox could send.
func stream(t *testing.T, build func(w *recordWriter) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	mustDo(t, build(newRecordWriter(&buf)))
	return buf.Bytes()
}

func TestHostileListingsAndPacksAreRefused(t *testing.T) {
	content := []byte("content the sandbox lists")
	h := sha256.Sum256(content)
	other := sha256.Sum256([]byte("another"))
	var zero Hash
	for _, tc := range []struct {
		name   string
		recipe []byte
		pack   []byte // nil: the honest pack of what is wanted
		lim    Limits
		want   error
	}{
		{name: "one hash, two sizes", want: ErrListing, recipe: stream(t, func(w *recordWriter) error {
			_ = w.ref(h, int64(len(content)))
			_ = w.ref(h, 3)
			return w.end(zero, int64(len(content))+3)
		})},
		{name: "past the byte limit", want: ErrListing, lim: Limits{Records: 10, Bytes: 100}, recipe: stream(t, func(w *recordWriter) error {
			_ = w.ref(h, 1<<30)
			return w.end(zero, 1<<30)
		})},
		{name: "past the contents limit", want: ErrListing, lim: Limits{Records: 10, Bytes: 1 << 20, Contents: 1}, recipe: stream(t, func(w *recordWriter) error {
			_ = w.ref(h, int64(len(content)))
			_ = w.ref(other, 7)
			return w.end(zero, int64(len(content))+7)
		})},
		{name: "past the record limit", want: ErrListing, lim: Limits{Records: 3, Bytes: 1 << 20}, recipe: stream(t, func(w *recordWriter) error {
			for range 5 {
				_ = w.literal([]byte("x"))
				_ = w.flushLiteral()
			}
			return w.end(zero, 5)
		})},
		{name: "end size that is not the sum", want: ErrListing, recipe: stream(t, func(w *recordWriter) error {
			_ = w.ref(h, int64(len(content)))
			return w.end(zero, 1)
		})},
		{name: "a hash the pack lacks", want: ErrPack,
			recipe: stream(t, func(w *recordWriter) error {
				_ = w.ref(h, int64(len(content)))
				return w.end(zero, int64(len(content)))
			}),
			pack: stream(t, func(w *recordWriter) error { return w.end(zero, 0) })},
		{name: "content not asked for", want: ErrPack,
			recipe: stream(t, func(w *recordWriter) error {
				_ = w.ref(h, int64(len(content)))
				return w.end(zero, int64(len(content)))
			}),
			pack: stream(t, func(w *recordWriter) error {
				_ = w.content(h, int64(len(content)), bytes.NewReader(content))
				_ = w.content(other, 7, bytes.NewReader([]byte("another")))
				return w.end(zero, 0)
			})},
		{name: "a lying size", want: ErrPack,
			recipe: stream(t, func(w *recordWriter) error { _ = w.ref(h, 5); return w.end(zero, 5) }),
			pack: stream(t, func(w *recordWriter) error {
				_ = w.content(h, 5, bytes.NewReader(content))
				return w.end(zero, 0)
			})},
		{name: "content that does not hash to its name", want: ErrPack,
			recipe: stream(t, func(w *recordWriter) error {
				_ = w.ref(other, int64(len(content)))
				return w.end(zero, int64(len(content)))
			}),
			pack: stream(t, func(w *recordWriter) error {
				_ = w.content(other, int64(len(content)), bytes.NewReader(content))
				return w.end(zero, 0)
			})},
		{name: "an end hash that is not the output", want: ErrRebuilt,
			recipe: stream(t, func(w *recordWriter) error {
				_ = w.ref(h, int64(len(content)))
				return w.end(other, int64(len(content)))
			})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := tc.lim
			if lim.Records == 0 {
				lim = testLimits
			}
			st := newMemStore()
			want, err := Wants(bytes.NewReader(tc.recipe), st, lim)
			if err == nil {
				pack := tc.pack
				if pack == nil {
					pack = stream(t, func(w *recordWriter) error {
						_ = w.content(h, int64(len(content)), bytes.NewReader(content))
						return w.end(zero, 0)
					})
				}
				err = TakePack(bytes.NewReader(pack), want, st, 1<<40, io.Discard)
			}
			if err == nil {
				err = Rebuild(io.Discard, bytes.NewReader(tc.recipe), st, want, nil)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
