package delta

import (
	"bytes"
	"io"
	"strconv"

	"github.com/restic/chunker"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
)

// MinContent is the smallest member data that is a content of its own;
// smaller data travels as literal bytes (a reference costs 41). The
// sandbox program splits at the same size.
const MinContent = guest.MinContent

// maxTail is the largest end of an archive (after its first zero block)
// that travels as literal bytes; a longer one is chunked.
const maxTail = 64 << 10

// pol is the irreducible polynomial of the content-defined chunker. Any
// fixed one works; it only has to stay the same for chunks to repeat.
const pol = chunker.Pol(0x3DA3358B4DC173)

// piece is a byte range of a file: content (hashed, skippable) or literal.
// A piece marked keep covers bytes that the pieces after it cover again:
// it is a content only for the worker's store, never sent (a git pack's
// whole data, which the sandbox's recipe of it names as one content).
type piece struct {
	content bool
	keep    bool
	off, n  int64
}

const block = 512

// Split cuts the file r of size bytes into pieces, in order and covering
// every byte (package doc): an archive's regular file data of at least
// MinContent bytes is content, its headers, padding and short data are
// literal; from the first block that is not a valid header on (or the
// whole file, when it is no archive), content-defined chunks.
func split(r io.ReaderAt, size int64, emit func(piece) error) error {
	if isPack(r, 0, size) {
		return memberData(r, 0, size, emit)
	}
	var hdr [block]byte
	off := int64(0)
	for off < size {
		if size-off < block {
			return emit(piece{off: off, n: size - off})
		}
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return err
		}
		if zero(hdr[:]) {
			if size-off <= maxTail {
				return emit(piece{off: off, n: size - off})
			}
			return chunks(r, off, size, emit)
		}
		data, regular, ok := member(hdr[:])
		padded := (data + block - 1) / block * block
		if !ok || padded > size-off-block {
			return chunks(r, off, size, emit)
		}
		if !regular || data < MinContent {
			if err := emit(piece{off: off, n: block + padded}); err != nil {
				return err
			}
		} else {
			if err := emit(piece{off: off, n: block}); err != nil {
				return err
			}
			if err := memberData(r, off+block, data, emit); err != nil {
				return err
			}
			if padded > data {
				if err := emit(piece{off: off + block + data, n: padded - data}); err != nil {
					return err
				}
			}
		}
		off += block + padded
	}
	return nil
}

// memberData emits a regular member's data: a git pack split at its
// objects (packPieces), anything else one content.
func memberData(r io.ReaderAt, off, n int64, emit func(piece) error) error {
	if isPack(r, off, n) {
		if err := emit(piece{keep: true, off: off, n: n}); err != nil {
			return err
		}
		return packPieces(r, off, n, emit)
	}
	return emit(piece{content: true, off: off, n: n})
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// member reads a tar header block: the bytes of data that follow it,
// whether that data is a regular file's, and whether the block is a valid
// header (its checksum and size field read). Header-only types (links,
// directories, devices, fifos) are followed by no data whatever their size
// field says, as Go's archive/tar and GNU tar read them.
func member(h []byte) (data int64, regular, ok bool) {
	want, ok := octal(h[148:156])
	if !ok {
		return 0, false, false
	}
	var sum int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	if sum != want {
		return 0, false, false
	}
	size, ok := sizeField(h[124:136])
	if !ok {
		return 0, false, false
	}
	switch h[156] {
	case '1', '2', '3', '4', '5', '6':
		return 0, false, true
	case '0', 0, '7':
		return size, true, true
	default:
		return size, false, true
	}
}

// octal reads a NUL- or space-terminated octal field.
func octal(f []byte) (int64, bool) {
	s := string(bytes.Trim(f, " \x00"))
	if s == "" {
		return 0, true
	}
	v, err := strconv.ParseInt(s, 8, 64)
	return v, err == nil && v >= 0
}

// sizeField reads a size: octal, or GNU base-256 (high bit of the first
// byte set, positive values only).
func sizeField(f []byte) (int64, bool) {
	if f[0]&0x80 == 0 {
		return octal(f)
	}
	if f[0] != 0x80 {
		return 0, false
	}
	var v int64
	for _, c := range f[1:] {
		if v > (1<<55)-1 {
			return 0, false
		}
		v = v<<8 | int64(c)
	}
	return v, true
}

// chunks cuts [off, size) of r into content-defined chunks.
func chunks(r io.ReaderAt, off, size int64, emit func(piece) error) error {
	c := chunker.New(io.NewSectionReader(r, off, size-off), pol)
	buf := make([]byte, chunker.MaxSize)
	for {
		ch, err := c.Next(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := emit(piece{content: ch.Length >= MinContent, off: off + int64(ch.Start), n: int64(ch.Length)}); err != nil {
			return err
		}
	}
}
