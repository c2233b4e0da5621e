package createos

import (
	"context"
	"sync"
)

// scopes is the driver's in-memory state of its leases, by scope: the
// tracked calls in flight, the scopes being released or destroyed, the
// scopes whose process containment is unproven, and whether the driver is
// shutting down. One mutex guards it all; only its verbs touch it.
type scopes struct {
	mu           sync.Mutex
	active       map[string]map[*trackedCall]struct{}
	closing      map[string]bool
	unconfirmed  map[string]bool
	shuttingDown bool
}

// trackedCall is one execute or sync in flight on a lease.
type trackedCall struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func newScopes() *scopes {
	return &scopes{active: map[string]map[*trackedCall]struct{}{}, closing: map[string]bool{}, unconfirmed: map[string]bool{}}
}

// needsCleanup reports whether scope is being released or destroyed, or
// its process containment is unproven.
func (s *scopes) needsCleanup(scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing[scope] || s.unconfirmed[scope]
}

// refuses reports whether new work on scope is refused: the driver is
// shutting down or the scope needs cleanup.
func (s *scopes) refuses(scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusesLocked(scope)
}

func (s *scopes) refusesLocked(scope string) bool {
	return s.shuttingDown || s.closing[scope] || s.unconfirmed[scope]
}

// enter registers call on scope, unless new work there is refused.
func (s *scopes) enter(scope string, call *trackedCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusesLocked(scope) {
		return false
	}
	if s.active[scope] == nil {
		s.active[scope] = map[*trackedCall]struct{}{}
	}
	s.active[scope][call] = struct{}{}
	return true
}

// leave unregisters call, then marks it done.
func (s *scopes) leave(scope string, call *trackedCall) {
	s.mu.Lock()
	delete(s.active[scope], call)
	if len(s.active[scope]) == 0 {
		delete(s.active, scope)
	}
	s.mu.Unlock()
	close(call.done)
}

// poison marks scope's process containment unproven, until its sandbox is
// destroyed (confirm).
func (s *scopes) poison(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unconfirmed[scope] = true
}

func (s *scopes) poisoned(scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unconfirmed[scope]
}

// confirm clears scope's poison: its sandbox is gone.
func (s *scopes) confirm(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unconfirmed, scope)
}

// beginClosing marks scope as being released or destroyed; only one such
// call at a time, until endClosing.
func (s *scopes) beginClosing(scope string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing[scope] {
		return errCleanupInProgress
	}
	s.closing[scope] = true
	return nil
}

func (s *scopes) endClosing(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.closing, scope)
}

// calls returns the calls in flight on scope.
func (s *scopes) calls(scope string) []*trackedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := make([]*trackedCall, 0, len(s.active[scope]))
	for c := range s.active[scope] {
		calls = append(calls, c)
	}
	return calls
}

// shutdown refuses all new work and returns every call in flight.
func (s *scopes) shutdown() []*trackedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuttingDown = true
	var calls []*trackedCall
	for _, set := range s.active {
		for c := range set {
			calls = append(calls, c)
		}
	}
	return calls
}

// errStopped is the cause given to tracked calls stopped by release,
// destroy or shutdown.
var errStopped = newError("CreateOS lease is being released.")

// stopCalls cancels calls and waits until each has finished its own
// cleanup, or ctx ends.
func stopCalls(ctx context.Context, calls []*trackedCall) error {
	for _, c := range calls {
		c.cancel(errStopped)
	}
	for _, c := range calls {
		select {
		case <-c.done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}
