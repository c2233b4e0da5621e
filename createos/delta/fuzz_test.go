package delta

import (
	"bytes"
	"io"
	"testing"
)

// FuzzDecode: any bytes decode to records or an error, never a panic or a
// record past its bounds; and a stream the encoder wrote decodes to the
// bytes it encoded.
func FuzzDecode(f *testing.F) {
	var good bytes.Buffer
	data := []byte("some bytes that are long enough to be compressed, compressed, compressed")
	if _, err := (&Encoder{}).Encode(&good, bytes.NewReader(data), int64(len(data))); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add([]byte(Magic))
	f.Add(append([]byte(Magic), 0, 0, 0, 0, 1, 0, 0, 0, 1, 'E'))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out int64
		_ = Decode(bytes.NewReader(b), func(rec Record, body io.Reader) error {
			if rec.Size < 0 || rec.Size > maxRecordSize {
				t.Fatalf("record size %d", rec.Size)
			}
			if body != nil {
				n, _ := io.Copy(io.Discard, body)
				out += n
			}
			return nil
		})
	})
}

// FuzzSplit: the pieces of any file cover it in order, and encoding then
// rebuilding gives it back.
func FuzzSplit(f *testing.F) {
	f.Add(testTar(f, 9, 12))
	f.Add([]byte("not a tar"))
	f.Add(packSeed(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		var off int64
		err := split(bytes.NewReader(b), int64(len(b)), func(p piece) error {
			if p.keep {
				if p.off != off || p.off+p.n > int64(len(b)) {
					t.Fatalf("kept piece at %d of %d bytes in %d, want at %d", p.off, p.n, len(b), off)
				}
				return nil
			}
			if p.off != off || p.n <= 0 {
				t.Fatalf("piece at %d of %d bytes, want at %d", p.off, p.n, off)
			}
			off += p.n
			return nil
		})
		if err != nil || off != int64(len(b)) {
			t.Fatalf("split covered %d of %d: %v", off, len(b), err)
		}
		var s bytes.Buffer
		if _, err := (&Encoder{}).Encode(&s, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		back, err := rebuildLocal(&s)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("rebuilt %d bytes of %d: %v", len(back), len(b), err)
		}
	})
}

// rebuildLocal applies a stream as the helper does, with the contents it
// carries as the only store.
func rebuildLocal(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	seen := map[Hash][]byte{}
	err := Decode(r, func(rec Record, body io.Reader) error {
		switch rec.Kind {
		case KindLiteral:
			_, err := io.Copy(&out, body)
			return err
		case KindContent:
			b, err := io.ReadAll(body)
			seen[rec.Hash] = b
			out.Write(b)
			return err
		case KindRef:
			b, ok := seen[rec.Hash]
			if !ok || int64(len(b)) != rec.Size {
				return io.ErrUnexpectedEOF
			}
			out.Write(b)
		}
		return nil
	})
	return out.Bytes(), err
}
