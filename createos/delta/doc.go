// Package delta is the wire format of the createos driver's incremental
// file sync, and the worker's side of it: a file moves between the worker
// and a sandbox as a stream of records that either carry bytes or name
// content the receiver already holds by its SHA-256.
//
// A stream is the magic line "PCSYNC1\n" followed by frames. A frame is a
// codec byte (0 raw, 1 raw DEFLATE), the decoded length and the encoded
// length (big-endian uint32 each, at most MaxFrame decoded), then the
// encoded bytes. A frame whose data does not shrink is sent raw, and once a
// frame of one content did not shrink, the rest of that content goes raw
// without trying (already compressed members cost no compression time).
//
// The frames' decoded bytes, end to end, are the records:
//
//	'H' n:u32 bytes[n]            literal output (tar headers, padding, small files)
//	'C' hash[32] n:u64 bytes[n]   content: output, and kept by the receiver under hash
//	'R' hash[32] n:u64            output the receiver's entry hash (n bytes)
//	'E' hash[32] n:u64            end: the whole output is n bytes hashing to hash
//
// A pack (content the worker asked for) is 'C' records and an 'E' with a
// zero hash and n = 0. Nothing may follow 'E'.
//
// What a content is: a tar archive is split at its members (Split): each
// regular file's data of at least MinContent bytes is one content, every
// other byte (headers, padding, the end) is literal; what is not a tar, and
// the rest of an archive from a block that does not parse as a header, is
// cut into content-defined chunks (github.com/restic/chunker). The split
// only decides what can be skipped: the receiver rebuilds the bytes in
// order and checks the end hash either way.
//
// The sandbox's side is the sandbox program's sync subcommands
// (createos/guest, run by node): apply rebuilds a stream, index lists the
// sandbox's store, recipe describes a file ('H' and 'R' records) and pack
// carries the contents the worker lacks. The constants both sides read
// (Magic, MaxFrame, Level, MinContent, the exit statuses) are guest's.
package delta
