// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", v0.3 with v0.1 lifecycle rules): the lease hooks, ordinary
// commands over one streaming exec (gated managed processes where an
// origin lacks it), file sync, interactive setup and snapshot templates,
// and the opening of live sessions (duplex pipe channels and login PTYs)
// on a lease it holds, which createos/channel runs. A call's
// config is parsed once by createos/config, where the call enters the
// driver, into a call (config, client, whom it is for) passed down, and
// bounded by the host's budget that package works out. It talks to the
// provider only through createos/api, bounds every step by the host's
// deadline with createos/deadline, builds every sandbox-side script with
// createos/script, moves sync mappings with createos/filesync (which packs
// and checks archives with createos/archive, and keeps the worker's sync
// store and the sweep of dead workers' temp dirs), keeps command output
// with createos/output and unconfirmed cleanups in createos/marks. The
// decisions behind the port are in docs/decisions.md.
package createos
