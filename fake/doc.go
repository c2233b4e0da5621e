// Package fake is the fake-plugin driver: a local stand-in for a sandbox
// whose leases are private temp directories and whose commands run as local
// process groups with streamed output, timeouts and exact cancellation. It
// is not an isolation boundary: commands run as the worker's user on the
// worker's machine, wherever the host asks; only file sync confines its
// sandbox-side paths to the lease root, which the worker holds open from
// acquire and reaches only through that handle (rootdir.go; a sync's
// copy is package synccopy). It matches the observable formats of
// Paperclip's TypeScript fake sandbox provider.
//
// A release or destroy answers a termination receipt only once every
// process the lease started is gone, also those that left its process
// group or session: while a driver runs the worker is a subreaper that
// reaps what it adopts, and every command carries the lease's marker
// (package proctree). While a process runs that no lease can be
// shown to own, no receipt is answered (null: termination unconfirmed).
// Every root records its owning worker (owner.go); a driver that boots
// (Start, or the first acquire) first ends what workers that died left in
// its temp dir — their processes and roots — and nothing of a live one
// (sweep.go).
//
// The driver builds for Linux and macOS; what differs lives in _linux.go
// files and their _darwin.go/_other.go counterparts. macOS has no child
// subreaper, no Pdeathsig, no pidfd and no /proc: its process table comes
// from sysctl (proctree), a teardown ends what carries the lease's
// marker wherever it went, and since an orphan that cleared its marker
// cannot be found there, releases on macOS answer no receipt.
//
// A command's env is held to internal/envrule, the rule the CreateOS
// driver has: a name that is not a shell identifier, or a value with a
// NUL, refuses the call with the same message before anything runs. A
// positive timeoutMs is at least one millisecond (msDuration). Every
// command is found through, and runs with, one PATH: the config's path
// directories, then an execute's env.PATH or the default (commandPATH).
//
// Live sessions — duplex channels and login terminals — are lease
// processes too (session.go, duplex.go, loginpty.go): a duplex process's
// stderr stays in the lease root, a login's HOME is a session home the
// lease holds and removes with itself (sessionhome.go).
package fake
