// Package synccopy is the copy of the fake driver's native file sync: one
// file mapping, a file or a directory's tree, between the host and a lease
// root the worker holds open (Copy). Every name a command controls is
// reached through a held directory, opened without blocking and refused
// when it is not what the copy looked at (ErrChanged).
//
// Symlinks copied without followSymlinks are kept with their target as
// written, whatever it is (as tar without -h, the host's own fallback and
// its restore merge keep them): the copy never follows a link it writes or
// finds in a target tree, and the sandbox side is reached only through
// os.Root, so a kept link cannot lead a sync out of the lease root. With
// followSymlinks the sandbox side still never leaves the root, and the
// host side never leaves the mapping's source directory: a host directory
// is read through its own root (safeopen.Tree), and a link is followed only
// when it resolves, through every link on its way, to a name inside it. A
// sandbox can leave links in the host workspace (sync-out keeps them as
// written), and a later sync-in must not copy the host files they name.
//
// Exclude lists (directory mappings only) mean what syncrule.Exclude says,
// matched against slash paths relative to the mapping's source directory;
// an excluded directory is skipped whole.
package synccopy
