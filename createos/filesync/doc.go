// Package filesync is the createos driver's native file sync: it checks a
// sync's mappings before any side effect, moves each one between the host
// and a sandbox through the files API (a directory as a tar archive,
// packed and checked by createos/archive), incrementally as delta streams
// (createos/delta) where it can and whole as one file where it cannot, and
// lands it in the sandbox with a guarded script (built by createos/script)
// and on the host through a private landing beside the target. How a
// script runs, and under which deadline, is the driver's (Transfer.Run).
//
// A worker keeps one Store: the sync mode, its content store
// (createos/castore) and what each sandbox's store is believed to hold;
// it hands each sync call its Incremental and logs each fallback reason
// once per sandbox. A transfer's host temp directories record their worker
// (archiveDir), and a Sweeper removes those of dead workers.
//
// Port decisions (the reference's file-sync.ts, v0.1):
//   - followSymlinks is honoured: host directory uploads dereference
//     links iff it is true, except for a link that leads outside the
//     source directory: a link is followed only when it resolves, through
//     every link on its way, inside the source (safeopen.Tree, the fake's
//     rule too), and one that leaves refuses the mapping before anything
//     of it is uploaded (createos/archive). The source is read through its
//     open root.
//   - Directory uploads archive regular files, directories and symlinks in
//     name order; hard links become separate files; other types are left
//     out. Host extraction does not restore owners, creates files 0600
//     before applying their exact mode, refuses hard links to anything but
//     a regular file, and creates missing host parents 0700.
//   - Exclusions mean what the host means (syncrule.Exclude, from
//     adapter-utils exclude-patterns.js), in both directions: archive.Pack
//     applies them inbound; outbound, tar drops the plain paths it
//     provably drops alike and, with an exclude list, archives hard links
//     as files (--hard-dereference), and the host filters the archive
//     entry by entry (archiveDirectoryScript, archive.Validate and
//     archive.Extract). The reference's port of path.matchesGlob and GNU
//     tar's own --exclude reading are not used.
//   - Every remote script is built word by word, each value quoted once
//     (script.go).
//   - The sandbox scratch file is removed after syncIn too (the reference
//     removes it after syncOut only).
//   - A download answered with HTTP 204/205 is refused as having no body.
//     A download asks for raw bytes (Accept-Encoding: identity), refuses a
//     content-encoded answer and writes at most 11 GiB (MaxDownloadBytes,
//     the driver's bound for its client), checked while writing.
//   - Host files are never opened in a way that can block (createos/archive,
//     the fake's rule): a fifo, device or socket source is refused, one
//     inside a directory left out, a name that changed since it was
//     looked at refused.
//   - Real-host audit (paperclipai 2026.916.1): a post-upload timeoutMs is
//     any number (the host stamps the run timeout, which may pass a day;
//     0 or less: only the sync call's deadline); outbound archives keep
//     symlinks with their targets as written and skip fifos and devices,
//     while an entry below a symlink, a hard link to one, sparse entries
//     and the 10 GiB limit are still refused before anything is written.
package filesync
