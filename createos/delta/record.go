package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
)

// Hash names a content: its SHA-256.
type Hash = castore.Hash

// Record kinds.
const (
	KindLiteral = 'H'
	KindContent = 'C'
	KindRef     = 'R'
	KindEnd     = 'E'
)

// maxLiteral bounds one literal record; longer literals are split.
const maxLiteral = 64 << 10

// recordWriter writes records to a frame writer, gathering adjacent
// literal bytes into one record.
type recordWriter struct {
	f   *frameWriter
	lit []byte
}

func newRecordWriter(w io.Writer) *recordWriter {
	return &recordWriter{f: newFrameWriter(w), lit: make([]byte, 0, maxLiteral)}
}

// literal appends p to the pending literal.
func (w *recordWriter) literal(p []byte) error {
	for len(p) > 0 {
		k := min(maxLiteral-len(w.lit), len(p))
		w.lit = append(w.lit, p[:k]...)
		p = p[k:]
		if len(w.lit) == maxLiteral {
			if err := w.flushLiteral(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *recordWriter) flushLiteral() error {
	if len(w.lit) == 0 {
		return nil
	}
	var hdr [5]byte
	hdr[0] = KindLiteral
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(w.lit)))
	if _, err := w.f.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.f.Write(w.lit)
	w.lit = w.lit[:0]
	return err
}

// head writes a hash-and-size record header.
func (w *recordWriter) head(kind byte, h Hash, n int64) error {
	if err := w.flushLiteral(); err != nil {
		return err
	}
	var hdr [41]byte
	hdr[0] = kind
	copy(hdr[1:33], h[:])
	binary.BigEndian.PutUint64(hdr[33:], uint64(n))
	_, err := w.f.Write(hdr[:])
	return err
}

// content writes a content record with n bytes read from r.
func (w *recordWriter) content(h Hash, n int64, r io.Reader) error {
	if err := w.head(KindContent, h, n); err != nil {
		return err
	}
	w.f.startContent()
	defer w.f.endContent()
	got, err := io.Copy(w.f, io.LimitReader(r, n))
	if err == nil && got != n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (w *recordWriter) ref(h Hash, n int64) error { return w.head(KindRef, h, n) }

// end writes the end record and closes the stream.
func (w *recordWriter) end(h Hash, n int64) error {
	if err := w.head(KindEnd, h, n); err != nil {
		return err
	}
	return w.f.Close()
}

// Record is one record read from a stream.
type Record struct {
	Kind byte
	Hash Hash  // content, ref, end
	Size int64 // bytes the record stands for
}

// ErrFormat is a stream that does not follow the format.
var ErrFormat = errFormat

// maxRecordSize bounds what one record may stand for: the driver's
// download bound (11 GiB).
const maxRecordSize = 11 << 30

// Decode reads stream r record by record and calls fn with each; a
// literal's or content's body is the reader fn gets (what fn leaves unread
// is skipped), nil for the others. It ends after the end record, which fn
// sees last, and fails on anything after it, on a stream without one, and
// on an error of fn.
func Decode(r io.Reader, fn func(rec Record, body io.Reader) error) error {
	fr, err := newFrameReader(r)
	if err != nil {
		return err
	}
	for {
		var kind [1]byte
		if _, err := io.ReadFull(fr, kind[:]); err != nil {
			return truncated(err)
		}
		rec := Record{Kind: kind[0]}
		var body io.Reader
		switch rec.Kind {
		case KindLiteral:
			var n [4]byte
			if _, err := io.ReadFull(fr, n[:]); err != nil {
				return truncated(err)
			}
			rec.Size = int64(binary.BigEndian.Uint32(n[:]))
		case KindContent, KindRef, KindEnd:
			var hdr [40]byte
			if _, err := io.ReadFull(fr, hdr[:]); err != nil {
				return truncated(err)
			}
			copy(rec.Hash[:], hdr[:32])
			size := binary.BigEndian.Uint64(hdr[32:])
			if size > maxRecordSize {
				return fmt.Errorf("%w: record size", errFormat)
			}
			rec.Size = int64(size)
		default:
			return fmt.Errorf("%w: unknown record", errFormat)
		}
		var lr *io.LimitedReader
		if rec.Kind == KindLiteral || rec.Kind == KindContent {
			lr = &io.LimitedReader{R: fr, N: rec.Size}
			body = lr
		}
		if err := fn(rec, body); err != nil {
			return err
		}
		if lr != nil {
			if _, err := io.Copy(io.Discard, lr); err != nil {
				return truncated(err)
			}
			if lr.N > 0 {
				return fmt.Errorf("%w: truncated record", errFormat)
			}
		}
		if rec.Kind == KindEnd {
			var one [1]byte
			if n, _ := fr.Read(one[:]); n != 0 {
				return fmt.Errorf("%w: data after the end", errFormat)
			}
			return nil
		}
	}
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated", errFormat)
	}
	return err
}
