package delta

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sort"
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

// Limits bound a recipe.
type Limits struct {
	Records int   // records
	Bytes   int64 // output bytes
}

// Wants reads a recipe and returns the contents it names that st lacks,
// sorted by hash, with their sizes; it checks the recipe against lim and
// that every hash has one size. A content record in a recipe is kept in st
// on the way.
func Wants(recipe io.Reader, st Store, lim Limits) (map[Hash]int64, error) {
	sizes := map[Hash]int64{}
	want := map[Hash]int64{}
	var records int
	var out int64
	err := Decode(recipe, func(rec Record, body io.Reader) error {
		records++
		if records > lim.Records {
			return ErrListing
		}
		if rec.Kind != KindEnd {
			out += rec.Size
			if out > lim.Bytes {
				return ErrListing
			}
		}
		switch rec.Kind {
		case KindContent, KindRef:
			if n, seen := sizes[rec.Hash]; seen && n != rec.Size {
				return ErrListing
			}
			sizes[rec.Hash] = rec.Size
		}
		switch rec.Kind {
		case KindContent:
			if err := st.Put(rec.Hash, body, rec.Size); err != nil {
				return fmt.Errorf("%w: %w", ErrPack, err)
			}
			delete(want, rec.Hash)
		case KindRef:
			if _, ok := st.Has(rec.Hash); !ok {
				want[rec.Hash] = rec.Size
			}
		case KindEnd:
			if rec.Size != out {
				return ErrListing
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return want, nil
}

// WantList is the sandbox's input for a pack: the hashes, sorted, end to
// end.
func WantList(want map[Hash]int64) []byte {
	hs := make([]Hash, 0, len(want))
	for h := range want {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return bytes.Compare(hs[i][:], hs[j][:]) < 0 })
	out := make([]byte, 0, len(hs)*len(Hash{}))
	for _, h := range hs {
		out = append(out, h[:]...)
	}
	return out
}

// TakePack keeps in st every content of pack, each of which must be in
// want at its size and hash to its name (st.Put checks), and requires all
// of want.
func TakePack(pack io.Reader, want map[Hash]int64, st Store) error {
	left := len(want)
	got := map[Hash]bool{}
	err := Decode(pack, func(rec Record, body io.Reader) error {
		switch rec.Kind {
		case KindContent:
			n, ok := want[rec.Hash]
			if !ok || n != rec.Size || got[rec.Hash] {
				return ErrPack
			}
			if err := st.Put(rec.Hash, body, rec.Size); err != nil {
				return fmt.Errorf("%w: %w", ErrPack, err)
			}
			got[rec.Hash] = true
			left--
		case KindEnd:
		default:
			return ErrPack
		}
		return nil
	})
	if err != nil {
		return err
	}
	if left != 0 {
		return ErrPack
	}
	return nil
}

// Rebuild writes the output recipe describes to w: its literal bytes and
// each named content from st (castore checks each entry's hash as it is
// copied), and checks the whole against the end record: its size, and its
// hash unless the end names none (all zeros: a recipe's, whose contents
// are each checked).
func Rebuild(w io.Writer, recipe io.Reader, st Store) error {
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
