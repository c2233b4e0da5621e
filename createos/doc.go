// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", v0.3 with v0.1 lifecycle rules): a paced HTTP client for the
// CreateOS control plane, config parsing, the lease hooks, ordinary
// commands over one streaming exec (execute_stream.go; gated managed
// processes where an origin lacks it, process.go), the output follower
// with its exit recovery (follow.go), interactive setup and snapshot
// templates (setup.go), and the live sessions (duplex pipe channels and
// login PTYs, session*.go).
//
// The decisions behind the port (how it differs from the reference, and
// why) are in docs/decisions.md, "createos port decisions".
package createos
