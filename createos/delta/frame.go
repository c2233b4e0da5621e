package delta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/flate"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
)

// Magic starts every stream ("PCSYNC1\n", as the sandbox program writes).
const Magic = guest.Magic

// MaxFrame bounds a frame's decoded bytes (1 MiB, on both sides).
const MaxFrame = guest.MaxFrame

// Level is the DEFLATE level frames are compressed at, on both sides
// (docs/decisions.md, "Sync that moves only what changed": ratio and cost
// measured).
const Level = guest.Level

// Frame codecs.
const (
	codecRaw     = 0
	codecDeflate = 1
)

// shrinks is how small a compressed frame must be, against its raw size,
// to be sent compressed: at most 15/16 of it.
func shrinks(enc, raw int) bool { return enc*16 <= raw*15 }

// frameWriter cuts a record stream into frames on w.
type frameWriter struct {
	w   *bufio.Writer
	buf []byte
	enc bytes.Buffer
	fw  *flate.Writer
	// raw sends the current content's frames uncompressed: one of its
	// frames did not shrink.
	raw bool
	// inContent is set while a content's bytes are written; a frame that
	// did not shrink sets raw only then.
	inContent bool
	n         int64 // bytes written to w
}

func newFrameWriter(w io.Writer) *frameWriter {
	fw, _ := flate.NewWriter(nil, Level) // Level is valid
	f := &frameWriter{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, MaxFrame), fw: fw}
	f.put([]byte(Magic))
	return f
}

func (f *frameWriter) put(p []byte) {
	n, _ := f.w.Write(p) // the error is kept by bufio and returned by flush
	f.n += int64(n)
}

// Write appends p to the record stream.
func (f *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := MaxFrame - len(f.buf)
		k := min(room, len(p))
		f.buf = append(f.buf, p[:k]...)
		p = p[k:]
		if len(f.buf) == MaxFrame {
			if err := f.frame(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// frame sends the buffered bytes as one frame.
func (f *frameWriter) frame() error {
	if len(f.buf) == 0 {
		return nil
	}
	codec, data := byte(codecRaw), f.buf
	if !f.raw {
		f.enc.Reset()
		f.fw.Reset(&f.enc)
		_, _ = f.fw.Write(f.buf) // writes to a bytes.Buffer
		_ = f.fw.Close()
		if shrinks(f.enc.Len(), len(f.buf)) {
			codec, data = codecDeflate, f.enc.Bytes()
		} else if f.inContent {
			f.raw = true
		}
	}
	var hdr [9]byte
	hdr[0] = codec
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(f.buf)))
	binary.BigEndian.PutUint32(hdr[5:], uint32(len(data)))
	f.put(hdr[:])
	f.put(data)
	f.buf = f.buf[:0]
	_, err := f.w.Write(nil)
	return err
}

// startContent and endContent bracket a content's bytes.
func (f *frameWriter) startContent() { f.inContent, f.raw = true, false }
func (f *frameWriter) endContent()   { f.inContent, f.raw = false, false }

// Close sends the last frame and flushes.
func (f *frameWriter) Close() error {
	if err := f.frame(); err != nil {
		return err
	}
	return f.w.Flush()
}

// errFormat is a stream that does not follow the format.
var errFormat = errors.New("delta: malformed stream")

// frameReader reads a stream's frames and yields the record stream.
type frameReader struct {
	r   *bufio.Reader
	buf []byte // decoded bytes not yet read
	dec []byte
	enc []byte // an encoded frame, reused
	fr  io.ReadCloser
	src bytes.Reader
}

func newFrameReader(r io.Reader) (*frameReader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != Magic {
		return nil, fmt.Errorf("%w: no magic", errFormat)
	}
	return &frameReader{r: br, dec: make([]byte, MaxFrame), fr: flate.NewReader(nil)}, nil
}

// Read implements io.Reader over the decoded frames; io.EOF at the end of
// the last whole frame.
func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *frameReader) next() error {
	var hdr [9]byte
	if _, err := io.ReadFull(f.r, hdr[:1]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return err
	}
	if _, err := io.ReadFull(f.r, hdr[1:]); err != nil {
		return fmt.Errorf("%w: truncated frame", errFormat)
	}
	raw, enc := int(binary.BigEndian.Uint32(hdr[1:])), int(binary.BigEndian.Uint32(hdr[5:]))
	if raw == 0 || raw > MaxFrame || enc > MaxFrame+MaxFrame/8 {
		return fmt.Errorf("%w: frame size", errFormat)
	}
	switch hdr[0] {
	case codecRaw:
		if enc != raw {
			return fmt.Errorf("%w: frame size", errFormat)
		}
		if _, err := io.ReadFull(f.r, f.dec[:raw]); err != nil {
			return fmt.Errorf("%w: truncated frame", errFormat)
		}
	case codecDeflate:
		if cap(f.enc) < enc {
			f.enc = make([]byte, enc)
		}
		data := f.enc[:enc]
		if _, err := io.ReadFull(f.r, data); err != nil {
			return fmt.Errorf("%w: truncated frame", errFormat)
		}
		f.src.Reset(data)
		if err := f.fr.(flate.Resetter).Reset(&f.src, nil); err != nil {
			return err
		}
		n, err := io.ReadFull(f.fr, f.dec[:raw])
		if err != nil || n != raw {
			return fmt.Errorf("%w: frame does not decode to its size", errFormat)
		}
		var one [1]byte
		if k, _ := f.fr.Read(one[:]); k != 0 {
			return fmt.Errorf("%w: frame does not decode to its size", errFormat)
		}
	default:
		return fmt.Errorf("%w: unknown codec", errFormat)
	}
	f.buf = f.dec[:raw]
	return nil
}
