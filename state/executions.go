package state

import (
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// MaxExecutionIDUnits is the longest executionId, in UTF-16 code units.
const MaxExecutionIDUnits = 512

// Reference messages for executionId problems.
var (
	ErrExecutionIDInvalid = UserText("Environment executionId must be a non-empty opaque string.")
	ErrExecutionIDTooLong = UserText("Environment executionId exceeds the 512-character limit.")
)

// ExecKey identifies one execution exactly.
type ExecKey struct {
	CompanyID       string
	EnvironmentID   string
	ProviderLeaseID string
	ExecutionID     string
}

// ValidateExecutionID checks an executionId as the reference registry does.
func ValidateExecutionID(id string) error {
	if id == "" {
		return ErrExecutionIDInvalid
	}
	if utf16.Len(id) > MaxExecutionIDUnits {
		return ErrExecutionIDTooLong
	}
	return nil
}

// Executions is a registry of active executions. An entry is added before
// any work starts, so a cancel racing the start finds it.
type Executions[T any] struct {
	mu      sync.Mutex
	entries map[ExecKey]T
}

// NewExecutions returns an empty registry.
func NewExecutions[T any]() *Executions[T] {
	return &Executions[T]{entries: map[ExecKey]T{}}
}

// Register adds v under k, refusing a key that is already active.
func (r *Executions[T]) Register(k ExecKey, v T) error {
	if err := ValidateExecutionID(k.ExecutionID); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[k]; ok {
		return Userf("Environment execution \"%s\" is already active.", k.ExecutionID)
	}
	r.entries[k] = v
	return nil
}

// Unregister removes k if it still maps to an entry for which same is true.
func (r *Executions[T]) Unregister(k ExecKey, same func(T) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.entries[k]; ok && same(v) {
		delete(r.entries, k)
	}
}

// Lookup returns the entry for exactly k.
func (r *Executions[T]) Lookup(k ExecKey) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.entries[k]
	return v, ok
}

// Len reports the number of active entries.
func (r *Executions[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}
