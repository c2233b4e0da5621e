package delta

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// BenchmarkEncodeCold is a cold encoding (nothing held) of a source-like
// archive with a few binaries: MB/s of the archive, and the stream's size
// against it (ratio). docs/decisions.md quotes it for Level.
func BenchmarkEncodeCold(b *testing.B) {
	archive := sourceTar(b, 32<<20)
	var ratio float64
	b.SetBytes(int64(len(archive)))
	for b.Loop() {
		var out countingWriter
		if _, err := (&Encoder{}).Encode(&out, bytes.NewReader(archive), int64(len(archive))); err != nil {
			b.Fatal(err)
		}
		ratio = float64(out) / float64(len(archive))
	}
	b.ReportMetric(ratio, "ratio")
}

// BenchmarkEncodeWarm encodes the same archive with every content held:
// what a warm run costs the worker.
func BenchmarkEncodeWarm(b *testing.B) {
	archive := sourceTar(b, 32<<20)
	all := func(Hash) bool { return true }
	var ratio float64
	b.SetBytes(int64(len(archive)))
	for b.Loop() {
		var out countingWriter
		if _, err := (&Encoder{Has: all}).Encode(&out, bytes.NewReader(archive), int64(len(archive))); err != nil {
			b.Fatal(err)
		}
		ratio = float64(out) / float64(len(archive))
	}
	b.ReportMetric(ratio, "ratio")
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

// sourceTar is an archive of about size bytes: source-like text files of
// varied lines, one in 40 a random binary.
func sourceTar(b testing.TB, size int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "ctx", "x", "y", "value", "string", "int", "map", "struct", "type", ":=", "==", "{", "}", "(", ")"}
	files := map[string][]byte{}
	total := 0
	for i := 0; total < size; i++ {
		var data []byte
		if i%40 == 39 {
			data = make([]byte, 100_000+rng.IntN(400_000))
			for j := range data {
				data[j] = byte(rng.IntN(256))
			}
		} else {
			var sb strings.Builder
			for range 20 + rng.IntN(400) {
				for range 3 + rng.IntN(9) {
					sb.WriteString(words[rng.IntN(len(words))])
					sb.WriteByte(' ')
				}
				fmt.Fprintf(&sb, "%d\n", rng.IntN(10000))
			}
			data = []byte(sb.String())
		}
		files[fmt.Sprintf("dir%d/file%d.go", i%50, i)] = data
		total += len(data) + 512
	}
	return tarFiles(b, files)
}

func tarFiles(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
