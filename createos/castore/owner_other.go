//go:build !unix

package castore

import "io/fs"

// ownedBySelf: without Unix ownership the directory's mode stands alone.
func ownedBySelf(fs.FileInfo) bool { return true }
