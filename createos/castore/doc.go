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
// Under the root, the store mends itself: a link, a file or a fifo where
// tmp, a bucket or a prefix directory belongs is removed (a link itself,
// never what it leads to) and the directory made again, 0700, before a
// Put or a Writer uses it, and the operation is tried once more if it was
// damaged again meanwhile; a directory, link or fifo in an entry's place
// is removed when the content is put. Reads (Has, CopyTo) never go
// through a link: what is not a directory, or a regular file where the
// entry is, holds no entry. The root itself is Open's to check, and it
// stays refused when it is wrong.
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
//
// Errors, by whose fault they are: ErrMismatch is the content's (what
// was offered is not the size and hash it was said to be: the sandbox's
// or the sender's); ErrMissing and ErrCorrupt are this store's entries
// (not held, or found wrong and removed: the worker fetches the content
// again); ErrDisk is the worker's own machine (its disk full, read-only
// or refusing, or a store directory Open refuses), with the system's
// error as its cause. An error of the caller's reader or writer comes
// back as it is. No error names the store's place on the host.
package castore
