// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", v0.3 with v0.1 lifecycle rules): the Driver holds each
// lease's life (acquire, resume, release, destroy, probe, interactive
// setup and snapshot templates) and wires the rest. A call's config is
// parsed once by createos/config where the call enters the driver, into a
// call (config, client, whom it is for) passed down and bounded by the
// host's budget for it (createos/deadline). Commands are run by
// createos/command (streaming exec, batches, managed processes); live
// sessions (duplex pipe channels and login PTYs) are opened on a lease the
// driver holds and run by createos/channel; sync mappings move through
// createos/filesync, which also keeps the worker's sync store and sweeps
// dead workers' temp dirs. It talks to the provider only through
// createos/api and keeps unconfirmed cleanups in createos/marks. The
// decisions behind it are indexed in docs/decisions.md.
package createos
