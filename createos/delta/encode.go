package delta

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"os"
)

// Store is what the worker keeps by hash (castore.Bucket).
type Store interface {
	Has(h Hash) (int64, bool)
	Put(h Hash, r io.Reader, size int64) error
	CopyTo(w io.Writer, h Hash, size int64) error
}

// Encoder writes a host file as a stream for a sandbox.
type Encoder struct {
	// Has reports whether the receiver is believed to hold h; nil for
	// nothing. A wrong belief costs a retry, never a wrong result: the
	// receiver checks every entry it uses and the end hash.
	Has func(h Hash) bool
	// Keep, when set, receives every content (best effort: the worker's
	// store, so that a later sync out finds it).
	Keep Store
}

// Summary is what an encoding sent.
type Summary struct {
	Size     int64  // the file's bytes
	Sum      Hash   // its SHA-256
	Contents []Hash // contents sent whole, in order
	Refs     int    // contents named by reference
}

// bufferMax is the largest content read once into memory; a longer one
// is read again for sending.
const bufferMax = 1 << 20

// Encode writes src (size bytes) to w as a stream. The file's own hash is
// taken beside the encoding, on another core (wholeHash).
func (e *Encoder) Encode(w io.Writer, src io.ReaderAt, size int64) (Summary, error) {
	rw := newRecordWriter(w)
	whole := startWholeHash(src, size)
	defer whole.stop()
	sum := Summary{Size: size}
	sent := map[Hash]bool{}
	buf := make([]byte, 0, bufferMax)
	member := sha256.New()
	err := split(src, size, func(p piece) error {
		if p.keep {
			if e.Keep != nil {
				h, data, err := hashPiece(member, src, p, buf[:0])
				if err != nil {
					return err
				}
				e.keep(h, src, p, data)
			}
			return nil
		}
		if !p.content {
			return e.literal(rw, src, p, buf[:0])
		}
		h, data, err := hashPiece(member, src, p, buf[:0])
		if err != nil {
			return err
		}
		if e.Keep != nil {
			e.keep(h, src, p, data)
		}
		if sent[h] || (e.Has != nil && e.Has(h)) {
			sum.Refs++
			return rw.ref(h, p.n)
		}
		sent[h] = true
		sum.Contents = append(sum.Contents, h)
		return rw.content(h, p.n, pieceReader(src, p, data))
	})
	if err != nil {
		return sum, err
	}
	if sum.Sum, err = whole.wait(); err != nil {
		return sum, err
	}
	return sum, rw.end(sum.Sum, size)
}

// wholeHash hashes a file front to back in a goroutine of its own.
type wholeHash struct {
	done chan struct{}
	quit chan struct{}
	sum  Hash
	err  error
}

func startWholeHash(src io.ReaderAt, size int64) *wholeHash {
	w := &wholeHash{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(w.done)
		h := sha256.New()
		buf := make([]byte, 1<<20)
		for off := int64(0); off < size; {
			select {
			case <-w.quit:
				w.err = errStopped
				return
			default:
			}
			n, err := src.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
			h.Write(buf[:n])
			off += int64(n)
			if err != nil && !(err == io.EOF && off == size) {
				w.err = err
				return
			}
		}
		copy(w.sum[:], h.Sum(nil))
	}()
	return w
}

var errStopped = errors.New("delta: stopped")

// wait returns the hash once it is taken.
func (w *wholeHash) wait() (Hash, error) {
	<-w.done
	return w.sum, w.err
}

// stop ends the goroutine and waits for it.
func (w *wholeHash) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

// literal sends p's bytes as literal.
func (e *Encoder) literal(rw *recordWriter, src io.ReaderAt, p piece, buf []byte) error {
	r := io.NewSectionReader(src, p.off, p.n)
	for {
		k, err := io.ReadFull(r, buf[:cap(buf)])
		if k > 0 {
			if werr := rw.literal(buf[:k]); werr != nil {
				return werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// hashPiece hashes a content piece and returns its bytes when they fit in
// buf.
func hashPiece(member hash.Hash, src io.ReaderAt, p piece, buf []byte) (Hash, []byte, error) {
	var h Hash
	member.Reset()
	r := io.NewSectionReader(src, p.off, p.n)
	if p.n <= int64(cap(buf)) {
		data := buf[:p.n]
		if _, err := io.ReadFull(r, data); err != nil {
			return h, nil, err
		}
		member.Write(data)
		copy(h[:], member.Sum(nil))
		return h, data, nil
	}
	if _, err := io.Copy(member, r); err != nil {
		return h, nil, err
	}
	copy(h[:], member.Sum(nil))
	return h, nil, nil
}

// pieceReader reads a content's bytes: from memory, else again from src.
func pieceReader(src io.ReaderAt, p piece, data []byte) io.Reader {
	if data != nil {
		return bytes.NewReader(data)
	}
	return io.NewSectionReader(src, p.off, p.n)
}

// keep puts a content in the worker's store unless it is there.
func (e *Encoder) keep(h Hash, src io.ReaderAt, p piece, data []byte) {
	if n, ok := e.Keep.Has(h); ok && n == p.n {
		return
	}
	_ = e.Keep.Put(h, pieceReader(src, p, data), p.n) // best effort
}

// EncodeFile encodes the regular file at path.
func (e *Encoder) EncodeFile(w io.Writer, f *os.File) (Summary, error) {
	info, err := f.Stat()
	if err != nil {
		return Summary{}, err
	}
	return e.Encode(w, f, info.Size())
}
