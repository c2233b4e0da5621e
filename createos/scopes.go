package createos

import (
	"context"
	"sync"
)

// scopes is the driver's in-memory state of its leases, by scope (a
// lease's company, environment, API origin, key and provider lease id;
// Driver.scope): the tracked calls in flight, the session channels open,
// the scopes being released or destroyed, the scopes whose process
// containment is unproven (by a command, or by a session: leftover); the
// leases acquired or resumed here (by leaseRef), and whether the driver is
// shutting down. One mutex guards it all; only its verbs touch it.
type scopes struct {
	mu           sync.Mutex
	active       scopeSets[*trackedCall]
	channels     scopeSets[*channel]
	closing      map[string]bool
	unconfirmed  map[string]bool
	leftover     map[string]bool
	leases       map[leaseRef]cachedLease
	resuming     map[string]int // resumes in flight, by sandbox id
	shuttingDown bool
}

// leaseRef names a cached lease as a session open names it: company,
// environment and provider lease id. Two tenants whose leases carry the
// same provider id (on two API origins) hold two refs; within one
// environment, the lease acquired or resumed last is the one its sessions
// open on.
type leaseRef struct{ companyID, environmentID, id string }

// cachedLease is what the driver keeps of a lease it acquired or resumed
// (the v0.2 reference's leases map): session opens carry no config, so
// they find the lease's config and scope by its leaseRef.
type cachedLease struct {
	companyID, environmentID string
	cfg                      Config
	scope                    string
}

// trackedCall is one execute or sync in flight on a lease.
type trackedCall struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func newScopes() *scopes {
	return &scopes{
		active: scopeSets[*trackedCall]{}, channels: scopeSets[*channel]{},
		closing: map[string]bool{}, unconfirmed: map[string]bool{}, leftover: map[string]bool{},
		leases: map[leaseRef]cachedLease{}, resuming: map[string]int{},
	}
}

// beginResume marks a resume of id in flight until endResume: the reaper
// leaves the sandbox alone.
func (s *scopes) beginResume(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resuming[id]++
}

func (s *scopes) endResume(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resuming[id]--; s.resuming[id] <= 0 {
		delete(s.resuming, id)
	}
}

// holds reports whether this worker holds a sandbox called id, for any
// tenant on any origin: a lease acquired or resumed here and not
// released, or a resume in flight. It errs on the side of holding: the
// reaper leaves such a sandbox alone.
func (s *scopes) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref := range s.leases {
		if ref.id == id {
			return true
		}
	}
	return s.resuming[id] > 0
}

// needsCleanup reports whether scope is being released or destroyed, or
// the containment of its commands or sessions is unproven.
func (s *scopes) needsCleanup(scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing[scope] || s.unconfirmed[scope] || s.leftover[scope]
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

// scopeSets is a set of T (tracked calls, session channels) per scope; a
// scope whose set is empty has no entry.
type scopeSets[T comparable] map[string]map[T]struct{}

func (m scopeSets[T]) add(scope string, v T) {
	if m[scope] == nil {
		m[scope] = map[T]struct{}{}
	}
	m[scope][v] = struct{}{}
}

func (m scopeSets[T]) remove(scope string, v T) {
	delete(m[scope], v)
	if len(m[scope]) == 0 {
		delete(m, scope)
	}
}

// members returns the set of scope as a slice.
func (m scopeSets[T]) members(scope string) []T {
	out := make([]T, 0, len(m[scope]))
	for v := range m[scope] {
		out = append(out, v)
	}
	return out
}

// admit adds v to sets under scope, unless new work on scope is refused.
func admit[T comparable](s *scopes, sets scopeSets[T], scope string, v T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusesLocked(scope) {
		return false
	}
	sets.add(scope, v)
	return true
}

// enter registers call on scope, unless new work there is refused.
func (s *scopes) enter(scope string, call *trackedCall) bool {
	return admit(s, s.active, scope, call)
}

// leave unregisters call, then marks it done.
func (s *scopes) leave(scope string, call *trackedCall) {
	s.mu.Lock()
	s.active.remove(scope, call)
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

// confirm clears scope's poison and leftover mark: its sandbox is gone.
func (s *scopes) confirm(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unconfirmed, scope)
	delete(s.leftover, scope)
}

// markLeftover records that a session's process on scope may still run
// (its creation or its termination could not be confirmed): the sandbox
// is not kept for reuse, and resume waits until it is destroyed (confirm).
// Commands and syncs on the lease go on.
func (s *scopes) markLeftover(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leftover[scope] = true
}

// hasLeftover reports whether markLeftover was called for scope since its
// sandbox was last destroyed.
func (s *scopes) hasLeftover(scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leftover[scope]
}

// cache remembers lease id, acquired or resumed here for l's company and
// environment; it replaces only that environment's entry for id.
func (s *scopes) cache(id string, l cachedLease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.shuttingDown {
		s.leases[leaseRef{l.companyID, l.environmentID, id}] = l
	}
}

// lease returns the cached lease ref names.
func (s *scopes) lease(ref leaseRef) (cachedLease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[ref]
	return l, ok
}

// forget drops the cached lease ref when it is scope's (a release or
// destroy of scope forgets its own lease). The entry ref names may be
// another tenant's lease with the same provider id, acquired or resumed
// later in the environment on another origin: that one stays.
func (s *scopes) forget(ref leaseRef, scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[ref]; ok && l.scope == scope {
		delete(s.leases, ref)
	}
}

// addChannel registers a session channel on scope, unless new work there
// is refused.
func (s *scopes) addChannel(scope string, ch *channel) bool {
	return admit(s, s.channels, scope, ch)
}

// dropChannel unregisters a channel that is over.
func (s *scopes) dropChannel(scope string, ch *channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels.remove(scope, ch)
}

// channelsOf returns the session channels open on scope.
func (s *scopes) channelsOf(scope string) []*channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channels.members(scope)
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
	return s.active.members(scope)
}

// shutdown refuses all new work, forgets the cached leases and returns
// every call in flight and every open session channel.
func (s *scopes) shutdown() ([]*trackedCall, []*channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuttingDown = true
	clear(s.leases)
	var calls []*trackedCall
	for _, set := range s.active {
		for c := range set {
			calls = append(calls, c)
		}
	}
	var chans []*channel
	for _, set := range s.channels {
		for ch := range set {
			chans = append(chans, ch)
		}
	}
	return calls, chans
}

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
