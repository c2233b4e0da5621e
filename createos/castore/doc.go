// Package castore is the worker's content-addressed store for the createos
// driver's incremental file sync: file contents the worker has seen, on its
// own disk, named by their SHA-256, so a sync can skip content the worker
// already holds.
//
// Layout, under a root directory of this user's own (mode 0700; Open
// refuses a link, a non-directory or another user's directory):
//
//	<root>/tmp/<random>                 content being written
//	<root>/<bucket>/<hh>/<sha256 hex>   an entry; hh is the hash's first two hex digits
//
// Directories are 0700, entries 0600. A bucket belongs to one company and
// is named by a hash of the company id, never the id itself; one
// company's bucket never answers with another's content, even for the
// same hash.
//
// The bound: entries of all companies together stay within the Store's
// maxBytes; when a store goes over it, the least recently used entries
// (oldest mtime; Put and CopyTo touch it) go first, down to 7/8 of the
// bound. The running total is counted at Open and recounted at each
// eviction, so another process on the same root costs a recount or an
// early eviction, never an entry's correctness.
//
// The crash rule: content is written to a temporary file, counted and
// hashed as it is written, and renamed into place only when it is exactly
// the named content, so an interrupted process leaves temporary files
// (removed by a later Open) and no wrong entry. Nothing is fsynced: after
// a power loss an entry may hold other bytes than its name says, and
// CopyTo, which hashes every copy, removes it and reports ErrCorrupt.
package castore
