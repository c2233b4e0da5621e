// Package state holds what drivers keep in worker memory: active
// executions keyed for exact cancellation, interactive setup sessions and
// captured templates. It is lost when the worker restarts, by design.
package state
