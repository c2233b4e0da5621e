package delta

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
)

// A sandbox is untrusted: what it sends is checked against these rules
// before the worker lands anything.
var (
	// ErrListing is a recipe past the limits or naming one content with
	// two sizes.
	ErrListing = errors.New("delta: the sandbox's listing is past the limits or inconsistent")
	// ErrPack is a pack with content the worker did not ask for, at
	// another size, not hashing to its name, or without what was asked.
	ErrPack = errors.New("delta: the sandbox sent content other than asked")
	// ErrRebuilt is an output that is not what the recipe's end record
	// says.
	ErrRebuilt = errors.New("delta: the rebuilt file is not what the sandbox listed")
)

// Limits bound what the worker reads of a sandbox's listing; past one, the
// listing is refused at once (ErrListing). Memory and time stay bounded
// by them, whatever the sandbox claims: a recipe is read as a stream, and
// only what the worker asks for is remembered.
type Limits struct {
	Records  int   // records
	Bytes    int64 // output bytes
	Contents int   // distinct contents the worker may ask for
}

// DefaultLimits are the driver's: 2^21 records (a member costs at most
// three, so about 700,000 files), the download bound of 11 GiB, and 2^17
// contents asked for (6 MiB of memory at most; a sync that lacks more
// moves whole).
var DefaultLimits = Limits{Records: 1 << 21, Bytes: 11 << 30, Contents: 1 << 17}

// Wanted is what a recipe names that the worker's store lacks: one entry
// per content, sorted by hash, with where the pack's bytes of it went.
type Wanted struct {
	list []wanted
	// Bytes is the wanted contents' sizes summed; Out the recipe's output
	// size.
	Bytes, Out int64
}

type wanted struct {
	h     Hash
	size  int64
	spill int64 // offset of its bytes in the spill file; notTaken, inStore
}

// wanted.spill of a content the pack has not brought yet, and of one kept
// in the store.
const (
	notTaken = -1
	inStore  = -2
)

// Len is how many contents are wanted.
func (w *Wanted) Len() int { return len(w.list) }

// List is the sandbox's input for a pack: the hashes, sorted, end to end.
func (w *Wanted) List() []byte {
	out := make([]byte, 0, len(w.list)*len(Hash{}))
	for _, e := range w.list {
		out = append(out, e.h[:]...)
	}
	return out
}

// find is the entry of h, or nil.
func (w *Wanted) find(h Hash) *wanted {
	if w == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(w.list, h, func(e wanted, h Hash) int { return bytes.Compare(e.h[:], h[:]) })
	if !ok {
		return nil
	}
	return &w.list[i]
}

// Wants reads a recipe and returns the contents it names that st lacks
// (or holds at another size: that entry is not what the recipe names),
// checking the recipe against lim and that every wanted hash has one size.
// A content record in a recipe is kept in st on the way.
func Wants(recipe io.Reader, st Store, lim Limits) (*Wanted, error) {
	w := &Wanted{}
	var records int
	var last Hash // the last hash found in st: a run of references to one content costs one look
	err := Decode(recipe, func(rec Record, body io.Reader) error {
		records++
		if records > lim.Records {
			return fmt.Errorf("%w: more than %d records", ErrListing, lim.Records)
		}
		if rec.Kind != KindEnd {
			w.Out += rec.Size
			if w.Out > lim.Bytes {
				return fmt.Errorf("%w: more than %d bytes", ErrListing, lim.Bytes)
			}
		}
		switch rec.Kind {
		case KindContent:
			if err := st.Put(rec.Hash, body, rec.Size); err != nil {
				return putError(err)
			}
		case KindRef:
			if rec.Hash == last {
				return nil
			}
			if n, ok := st.Has(rec.Hash); ok && n == rec.Size {
				last = rec.Hash
				return nil
			}
			if k := len(w.list); k > 0 && w.list[k-1].h == rec.Hash && w.list[k-1].size == rec.Size {
				return nil
			}
			if len(w.list) == lim.Contents {
				return fmt.Errorf("%w: more than %d contents wanted", ErrListing, lim.Contents)
			}
			w.list = append(w.list, wanted{h: rec.Hash, size: rec.Size, spill: notTaken})
		case KindEnd:
			if rec.Size != w.Out {
				return fmt.Errorf("%w: the end's size is not the output's", ErrListing)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(w.list, func(a, b wanted) int { return bytes.Compare(a.h[:], b.h[:]) })
	w.list = slices.CompactFunc(w.list, func(a, b wanted) bool { return a.h == b.h && a.size == b.size })
	for i := range w.list {
		if i > 0 && w.list[i].h == w.list[i-1].h {
			return nil, fmt.Errorf("%w: one content with two sizes", ErrListing)
		}
		w.Bytes += w.list[i].size
	}
	return w, nil
}

// putError is a store's refusal of content as the sandbox's fault
// (ErrPack) when the content did not match, else as it is (the worker's
// own disk).
func putError(err error) error {
	if errors.Is(err, castore.ErrMismatch) {
		return fmt.Errorf("%w: %w", ErrPack, err)
	}
	return err
}

// TakePack takes every content of pack, each of which must be wanted at
// its size, hash to its name and come once, and requires all of w. When
// the wanted contents together fit in keepMax bytes, they are kept in st
// (which checks them); otherwise each is checked and appended to spill,
// the caller's own file for this one rebuild, so that a store too small
// for a mapping costs no second transfer.
func TakePack(pack io.Reader, w *Wanted, st Store, keepMax int64, spill io.Writer) error {
	left := len(w.list)
	keep := w.Bytes <= keepMax
	var at int64
	err := Decode(pack, func(rec Record, body io.Reader) error {
		switch rec.Kind {
		case KindContent:
			e := w.find(rec.Hash)
			if e == nil || e.size != rec.Size || e.spill != notTaken {
				return fmt.Errorf("%w: content not asked for", ErrPack)
			}
			if keep {
				if err := st.Put(rec.Hash, body, rec.Size); err != nil {
					return putError(err)
				}
				e.spill = inStore
			} else {
				sum := sha256.New()
				n, err := io.Copy(io.MultiWriter(spill, sum), body)
				if err != nil {
					return err
				}
				if n != rec.Size || Hash(sum.Sum(nil)) != rec.Hash {
					return fmt.Errorf("%w: content does not match its name", ErrPack)
				}
				e.spill, at = at, at+n
			}
			left--
		case KindEnd:
		default:
			return fmt.Errorf("%w: a record a pack does not hold", ErrPack)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("%w: %d contents asked for did not come", ErrPack, left)
	}
	return nil
}

// Rebuild writes the output recipe describes to w: its literal bytes and
// each named content, from spill where TakePack put it there, else from st
// (castore checks each entry's hash as it is copied), and checks the whole
// against the end record: its size, and its hash unless the end names
// none (all zeros: a recipe's, whose contents are each checked). got and
// spill are nil when nothing was fetched.
func Rebuild(w io.Writer, recipe io.Reader, st Store, got *Wanted, spill io.ReaderAt) error {
	total := sha256.New()
	out := io.MultiWriter(w, total)
	var n int64
	return Decode(recipe, func(rec Record, body io.Reader) error {
		switch rec.Kind {
		case KindLiteral, KindContent:
			k, err := io.Copy(out, body)
			n += k
			return err
		case KindRef:
			n += rec.Size
			if e := got.find(rec.Hash); e != nil && e.spill >= 0 && e.size == rec.Size {
				_, err := io.Copy(out, io.NewSectionReader(spill, e.spill, e.size))
				return err
			}
			return st.CopyTo(out, rec.Hash, rec.Size)
		case KindEnd:
			var sum Hash
			copy(sum[:], total.Sum(nil))
			if rec.Size != n || (rec.Hash != Hash{} && sum != rec.Hash) {
				return ErrRebuilt
			}
		}
		return nil
	})
}

// Check reads every content a recipe names from st, whose CopyTo removes
// an entry that is not what its name says; it returns the first error.
func Check(recipe io.Reader, st Store) error {
	var first error
	err := Decode(recipe, func(rec Record, _ io.Reader) error {
		if rec.Kind == KindRef {
			if err := st.CopyTo(io.Discard, rec.Hash, rec.Size); err != nil && first == nil {
				first = err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return first
}
