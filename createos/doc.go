// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", v0.3 with v0.1 lifecycle rules): config parsing, the lease
// hooks, ordinary commands (run by createos/command: streaming exec,
// batches, managed processes), file sync, interactive setup and
// snapshot templates, and the live sessions (duplex pipe channels and
// login PTYs). A call's config is parsed once, where the call enters the
// driver, into a call (config, client, whom it is for) passed down. It
// talks to the provider only through createos/api, bounds every step by
// the host's deadline with createos/deadline, builds every sandbox-side
// script with createos/script, moves sync mappings with createos/filesync
// (which packs and checks archives with createos/archive) and keeps
// unconfirmed cleanups in createos/marks.
// The decisions behind the port are in docs/decisions.md.
package createos
