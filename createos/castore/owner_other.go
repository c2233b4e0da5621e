//go:build !unix

package castore

import (
	"io/fs"
	"os"
)

// ownedBySelf: without Unix ownership the directory's mode stands alone.
func ownedBySelf(fs.FileInfo) bool { return true }

// openEntryFlags open an entry for reading.
const openEntryFlags = os.O_RDONLY

// touchFile cannot mark an open file here: the caller touches it by name.
func touchFile(*os.File) bool { return false }
