// Package rpc owns the worker's wire: newline-delimited JSON-RPC 2.0 over a
// pair of byte streams, concurrent request dispatch with cancellation and
// drain, error-to-code mapping, and notifications back to the host.
// It knows nothing about sandboxes.
package rpc
