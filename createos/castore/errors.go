package castore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Errors reach logs and users: they never name the store's place on the
// host (ioError drops it).
var (
	// ErrMissing is content the bucket does not hold.
	ErrMissing = errors.New("castore: entry missing")
	// ErrCorrupt is an entry whose bytes are not what its name says; it
	// has been removed.
	ErrCorrupt = errors.New("castore: entry corrupt")
	// ErrMismatch is content offered to a bucket that is not its stated
	// size or does not hash to its stated hash; nothing of it was kept.
	ErrMismatch = errors.New("castore: content does not match its hash and size")
)

// errRoot is a store directory Open does not use.
var errRoot = errors.New("castore: store directory refused")

// errClosed is a Writer used after Commit or Close.
var errClosed = errors.New("castore: writer already closed")

// ioError is err, from an operation in the store, without the path it
// names: the cause (a syscall error, fs.ErrNotExist and the like) stays
// reachable with errors.Is.
func ioError(op string, err error) error {
	for {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		default:
			return fmt.Errorf("castore: %s: %w", op, err)
		}
	}
}
