package delta

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// randomBytes is n bytes of seeded noise (no chunk of it repeats).
func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// tarFile is one file of a test archive: a regular file with data, or a
// hard link (link set) to an earlier member.
type tarFile struct {
	name, link string
	data       []byte
}

func tarOf(t *testing.T, files ...tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range files {
		h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}
		if m.link != "" {
			h = &tar.Header{Name: m.name, Mode: 0o644, Typeflag: tar.TypeLink, Linkname: m.link}
		}
		mustDo(t, tw.WriteHeader(h))
		_, err := tw.Write(m.data)
		mustDo(t, err)
	}
	mustDo(t, tw.Close())
	return buf.Bytes()
}

// sparseFile is a file of size bytes, holes but for a few islands of
// noise, made sparse on disk.
func sparseFile(t *testing.T, p string, size int64) {
	f, err := os.Create(p)
	mustDo(t, err)
	defer f.Close()
	mustDo(t, f.Truncate(size))
	for i, off := range []int64{0, size / 3, size / 2, size - 4096} {
		_, err := f.WriteAt(randomBytes(uint64(20+i), 4096), off)
		mustDo(t, err)
	}
}

// applyTwice applies src cold (the store empty of it) and warm (the
// encoder told what the store holds), and checks both outputs.
func applyTwice(t *testing.T, s *sandbox, src string) {
	t.Helper()
	f, err := os.Open(src)
	mustDo(t, err)
	defer f.Close()
	sum := sha256File(t, src)
	for i, has := range []func(Hash) bool{nil, nil} {
		if i == 1 {
			held := s.storeEntries()
			has = func(h Hash) bool { return held[h] }
		}
		out, err := os.Create(s.path("stream"))
		mustDo(t, err)
		_, err = (&Encoder{Has: has, Keep: newMemStore()}).EncodeFile(out, f)
		mustDo(t, errors.Join(err, out.Close()))
		if got := s.run("apply", s.path("stream"), s.path("out"), s.ws); got != 0 {
			t.Fatalf("apply %d: exit %d: %s", i, got, s.lastError)
		}
		if got := sha256File(t, s.path("out")); got != sum {
			t.Fatalf("apply %d: the output differs from its source", i)
		}
	}
}

func sha256File(t *testing.T, p string) Hash {
	t.Helper()
	f, err := os.Open(p)
	mustDo(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	mustDo(t, err)
	return Hash(h.Sum(nil))
}

// TestApplyRebuildsRepeatedContent: a content met twice in one stream is
// named by reference the second time, and the helper reads it back from
// what it has written.
func TestApplyRebuildsRepeatedContent(t *testing.T) {
	noise := randomBytes(1, 300_000)
	block := randomBytes(2, 3<<20)
	small := []byte("tiny")
	edge := randomBytes(3, MinContent)
	for _, tc := range []struct {
		name string
		make func(t *testing.T, p string)
	}{
		{"two equal members", func(t *testing.T, p string) {
			mustDo(t, os.WriteFile(p, tarOf(t, tarFile{name: "LICENSE", data: noise}, tarFile{name: "sub/LICENSE", data: noise}), 0o600))
		}},
		{"a hard link and a copy", func(t *testing.T, p string) {
			mustDo(t, os.WriteFile(p, tarOf(t, tarFile{name: "a", data: noise}, tarFile{name: "b", link: "a"}, tarFile{name: "c", data: noise}), 0o600))
		}},
		{"a file whose chunk repeats", func(t *testing.T, p string) {
			mustDo(t, os.WriteFile(p, bytes.Repeat(block, 4), 0o600))
		}},
		{"empty and tiny files, twice each", func(t *testing.T, p string) {
			mustDo(t, os.WriteFile(p, tarOf(t,
				tarFile{name: "e1"}, tarFile{name: "t1", data: small}, tarFile{name: "m1", data: edge},
				tarFile{name: "e2"}, tarFile{name: "t2", data: small}, tarFile{name: "m2", data: edge}), 0o600))
		}},
		{"an empty file", func(t *testing.T, p string) { mustDo(t, os.WriteFile(p, nil, 0o600)) }},
		{"a large sparse file", func(t *testing.T, p string) { sparseFile(t, p, 96<<20) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			tc.make(t, s.path("src"))
			applyTwice(t, s, s.path("src"))
		})
	}
}

// TestApplyReusesContentAcrossMappings: a second stream names by
// reference what the first stored, twice, and repeats a content of its
// own.
func TestApplyReusesContentAcrossMappings(t *testing.T) {
	s := newSandbox(t)
	shared, own := randomBytes(4, 200_000), randomBytes(5, 150_000)
	first := tarOf(t, tarFile{name: "x", data: shared}, tarFile{name: "y", data: randomBytes(6, 1000)})
	second := tarOf(t, tarFile{name: "a", data: shared}, tarFile{name: "b", data: own}, tarFile{name: "c", data: shared}, tarFile{name: "d", data: own})
	encode(t, &Encoder{}, first, s.path("first"))
	if got := s.run("apply", s.path("first"), s.path("out1"), s.ws); got != 0 {
		t.Fatalf("first apply: exit %d: %s", got, s.lastError)
	}
	held := s.storeEntries()
	sum := encode(t, &Encoder{Has: func(h Hash) bool { return held[h] }}, second, s.path("second"))
	if len(sum.Contents) != 1 || sum.Refs != 3 {
		t.Fatalf("the second stream sent %d contents and %d references, want 1 and 3", len(sum.Contents), sum.Refs)
	}
	if got := s.run("apply", s.path("second"), s.path("out2"), s.ws); got != 0 {
		t.Fatalf("second apply: exit %d: %s", got, s.lastError)
	}
	assertFile(t, s.path("out2"), second)
	if held := s.storeEntries(); len(held) != 3 {
		t.Fatalf("the store holds %d entries, want 3 (each content once)", len(held))
	}
}

// TestRecipeOfRepeatedContent: a sync out of an archive with a content
// twice lists it twice and is rebuilt whole.
func TestRecipeOfRepeatedContent(t *testing.T) {
	s := newSandbox(t)
	noise := randomBytes(7, 5<<20)
	data := tarOf(t, tarFile{name: "a", data: noise}, tarFile{name: "b", data: noise}, tarFile{name: "c", data: noise[:1000]}, tarFile{name: "d", data: noise[:1000]})
	got, asked := fetch(t, s, "tar", data, newMemStore())
	if !bytes.Equal(got, data) {
		t.Fatal("the rebuilt archive differs")
	}
	if asked != 2 {
		t.Fatalf("asked for %d contents, want 2", asked)
	}
	if held := s.storeEntries(); len(held) != 2 {
		t.Fatalf("the sandbox store holds %d entries, want 2", len(held))
	}
}
