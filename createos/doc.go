// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", v0.3 with v0.1 lifecycle rules): config parsing, the lease
// hooks, ordinary commands over one streaming exec (gated managed
// processes where an origin lacks it), file sync, interactive setup and
// snapshot templates, and the live sessions (duplex pipe channels and
// login PTYs). It talks to the provider only through createos/api, bounds
// every step by the host's deadline with createos/deadline, builds every
// sandbox-side script with createos/script, packs and checks sync archives
// with createos/archive and keeps unconfirmed cleanups in createos/marks.
// The decisions behind the port are in docs/decisions.md.
package createos
