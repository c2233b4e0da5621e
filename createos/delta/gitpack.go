package delta

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"github.com/klauspost/compress/zlib"
)

// A git pack (git's gitformat-pack: "PACK", a version, an object count,
// then each object as a variable-length header and a zlib stream, then
// the pack's SHA-1) is split at its objects: each object's header is
// literal, its zlib stream a content of its own. A host that makes a new
// pack of the same repository every run (a depth-1 clone) writes most
// objects' streams byte for byte as before, while their offsets, and so
// the deltas' headers, move; the streams are what repeats.

// packMagic starts a pack of version 2 or 3.
var packMagic = [...][]byte{[]byte("PACK\x00\x00\x00\x02"), []byte("PACK\x00\x00\x00\x03")}

// minPack is the smallest member checked for being a pack.
const minPack = 4 << 10

// isPack reports whether the n bytes at off of r start like a pack.
func isPack(r io.ReaderAt, off, n int64) bool {
	if n < minPack {
		return false
	}
	var head [8]byte
	if _, err := r.ReadAt(head[:], off); err != nil {
		return false
	}
	for _, m := range packMagic {
		if bytes.Equal(head[:], m) {
			return true
		}
	}
	return false
}

// Object types of a pack that carry a base before their stream.
const (
	objOfsDelta = 6
	objRefDelta = 7
)

// maxObjectSize bounds an object's inflated size as a pack's header may
// state it; what is larger is no pack this split reads.
const maxObjectSize = 1 << 40

// errNotPack is a pack that does not parse from some object on.
var errNotPack = errors.New("delta: not a git pack")

// packReader reads a pack front to back and counts what it consumed; it
// is an io.ByteReader, so that an inflater reads no byte past its stream.
type packReader struct {
	br *bufio.Reader
	n  int64 // bytes consumed from the pack's start
}

func (p *packReader) Read(b []byte) (int, error) {
	k, err := p.br.Read(b)
	p.n += int64(k)
	return k, err
}

func (p *packReader) ReadByte() (byte, error) {
	c, err := p.br.ReadByte()
	if err == nil {
		p.n++
	}
	return c, err
}

// packPieces emits the pack of n bytes at off of r as pieces covering
// exactly those bytes: the header and every object's header literal, each
// object's stream a content (literal when under MinContent), the trailer
// literal. From an object that does not parse on, the rest is chunked.
func packPieces(r io.ReaderAt, off, n int64, emit func(piece) error) error {
	pr := &packReader{br: bufio.NewReaderSize(io.NewSectionReader(r, off, n), 256<<10)}
	var head [12]byte
	if _, err := io.ReadFull(pr, head[:]); err != nil {
		return chunks(r, off, off+n, emit)
	}
	count := int64(head[8])<<24 | int64(head[9])<<16 | int64(head[10])<<8 | int64(head[11])
	lit := int64(0) // start of the literal bytes not yet emitted, from off
	var zr io.ReadCloser
	defer func() {
		if zr != nil {
			zr.Close()
		}
	}()
	for i := int64(0); i < count; i++ {
		if err := packObjectHeader(pr); err != nil {
			return packRest(r, off, n, lit, emit)
		}
		start := pr.n
		var err error
		if zr == nil {
			zr, err = zlib.NewReader(pr)
		} else {
			err = zr.(zlib.Resetter).Reset(pr, nil)
		}
		if err == nil {
			_, err = io.Copy(io.Discard, zr)
		}
		if err != nil || pr.n > n {
			return packRest(r, off, n, lit, emit)
		}
		if pr.n-start < MinContent {
			continue
		}
		if err := emit(piece{off: off + lit, n: start - lit}); err != nil {
			return err
		}
		if err := emit(piece{content: true, off: off + start, n: pr.n - start}); err != nil {
			return err
		}
		lit = pr.n
	}
	return packRest(r, off, n, lit, emit)
}

// packRest emits what follows the objects a split could read, from lit:
// literal when it is as short as a pack's trailer may be, else chunked.
func packRest(r io.ReaderAt, off, n, lit int64, emit func(piece) error) error {
	if n-lit <= maxTail {
		if n == lit {
			return nil
		}
		return emit(piece{off: off + lit, n: n - lit})
	}
	return chunks(r, off+lit, off+n, emit)
}

// packObjectHeader reads an object's header: its type and inflated size,
// then an offset-delta's base offset or a ref-delta's base name.
func packObjectHeader(pr *packReader) error {
	c, err := pr.ReadByte()
	if err != nil {
		return errNotPack
	}
	typ := (c >> 4) & 7
	size, shift := int64(c&15), uint(4)
	for c&0x80 != 0 {
		if c, err = pr.ReadByte(); err != nil || shift > 35 {
			return errNotPack
		}
		size |= int64(c&0x7f) << shift
		shift += 7
	}
	if typ == 0 || typ == 5 || size > maxObjectSize {
		return errNotPack
	}
	switch typ {
	case objOfsDelta:
		for k := 0; ; k++ {
			if c, err = pr.ReadByte(); err != nil || k > 8 {
				return errNotPack
			}
			if c&0x80 == 0 {
				break
			}
		}
	case objRefDelta:
		var base [20]byte
		if _, err := io.ReadFull(pr, base[:]); err != nil {
			return errNotPack
		}
	}
	return nil
}
