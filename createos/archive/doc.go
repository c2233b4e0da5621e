// Package archive is the host side of the createos driver's directory
// transfers: Pack writes a host directory as a tar archive with node-tar's
// names, read through its open root and never blocking on a fifo;
// Validate checks an archive downloaded from a sandbox before anything of
// it is written (no absolute or escaping names, no hard link out, no
// special entries, at most MaxBytes); Extract writes a validated archive
// under a target without ever writing through a link. OpenSourceFile opens
// a file mapping's host source under the same rules.
package archive
