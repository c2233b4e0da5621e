// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", baseline v0.1): a paced HTTP client for the CreateOS control
// plane, config parsing, and the lease and managed-process execute hooks.
package createos
