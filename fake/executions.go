package fake

import (
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// maxExecutionIDUnits is the longest executionId, in UTF-16 code units.
const maxExecutionIDUnits = 512

// executionKey identifies one execution exactly.
type executionKey struct {
	CompanyID       string
	EnvironmentID   string
	ProviderLeaseID string
	ExecutionID     string
}

// validateExecutionID checks an executionId as the plugin SDK's execution
// registry does, which Paperclip's TypeScript fake provider runs in.
func validateExecutionID(id string) error {
	if id == "" {
		return errExecutionIDInvalid
	}
	if utf16.Len(id) > maxExecutionIDUnits {
		return errExecutionIDTooLong
	}
	return nil
}

// executions is a registry of active executions. An entry is added before
// any work starts, so a cancel racing the start finds it.
type executions[T any] struct {
	mu      sync.Mutex
	entries map[executionKey]T
}

// newExecutions returns an empty registry.
func newExecutions[T any]() *executions[T] {
	return &executions[T]{entries: map[executionKey]T{}}
}

// Register adds v under k, refusing a key that is already active.
func (r *executions[T]) Register(k executionKey, v T) error {
	if err := validateExecutionID(k.ExecutionID); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[k]; ok {
		return errExecutionActive(k.ExecutionID)
	}
	r.entries[k] = v
	return nil
}

// Unregister removes k if it still maps to an entry for which same is true.
func (r *executions[T]) Unregister(k executionKey, same func(T) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.entries[k]; ok && same(v) {
		delete(r.entries, k)
	}
}

// Lookup returns the entry for exactly k.
func (r *executions[T]) Lookup(k executionKey) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.entries[k]
	return v, ok
}

// Len reports the number of active entries.
func (r *executions[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}
