package castore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Errors reach logs and users: they never name the store's place on the
// host (ioError drops it). Whose fault each is, see the package doc.
var (
	// ErrDisk is the worker's own disk failing the store (full,
	// read-only, permission refused, or a store directory Open refuses):
	// the machine's fault, never the content's or the sandbox's. Every
	// error of the store's own I/O wraps it, and its cause (a syscall
	// error such as syscall.ENOSPC) with it.
	ErrDisk = errors.New("castore: the worker's sync store on this machine failed")
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
var errRoot = fmt.Errorf("%w: store directory refused", ErrDisk)

// errClosed is a Writer used after Commit or Close.
var errClosed = errors.New("castore: writer already closed")

// ioError is err, from the operation op in the store, as an ErrDisk
// without the path it names: the cause (a syscall error, fs.ErrNotExist
// and the like) stays reachable with errors.Is.
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
			return fmt.Errorf("%w: %s: %w", ErrDisk, op, err)
		}
	}
}
