package createos

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/channel"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
)

// scopes is the driver's in-memory state of its leases: each lease's
// state by its scope (scopeKey), the leases acquired or resumed here (by
// leaseRef, as a session open names them), the resumes in flight, and
// whether the driver is shutting down. One mutex guards it all; only its
// verbs touch it.
type scopes struct {
	mu           sync.Mutex
	byScope      map[scopeKey]*leaseState // a lease whose state is all zero has no entry
	leases       map[leaseRef]cachedLease
	resuming     map[string]int // resumes in flight, by sandbox id
	shuttingDown bool
}

// leaseState is what the driver knows of one lease (scope) in memory.
type leaseState struct {
	calls    map[*trackedCall]struct{}     // executes and syncs in flight
	channels map[*channel.Channel]struct{} // session channels open
	closing  bool                          // being released or destroyed
	// unconfirmed: the process containment of a command is unproven
	// (poison), until the sandbox is destroyed (confirm).
	unconfirmed bool
	// leftover: a session's process may still run (markLeftover), until
	// the sandbox is destroyed (confirm).
	leftover bool
}

// zero reports whether l holds nothing worth an entry.
func (l *leaseState) zero() bool {
	return len(l.calls) == 0 && len(l.channels) == 0 && !l.closing && !l.unconfirmed && !l.leftover
}

// leaseRef names a cached lease as a session open names it: company,
// environment and provider lease id. Two tenants whose leases carry the
// same provider id (on two API origins) hold two refs; within one
// environment, the lease acquired or resumed last is the one its sessions
// open on.
type leaseRef struct{ companyID, environmentID, id string }

// cachedLease is what the driver keeps of a lease it acquired or resumed
// (the v0.2 reference's leases map): session opens carry no config, so they
// find the lease's parsed config and scope by its leaseRef.
type cachedLease struct {
	companyID, environmentID string
	cfg                      config.Config
	scope                    scopeKey
}

// trackedCall is one execute or sync in flight on a lease.
type trackedCall struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func newScopes() *scopes {
	return &scopes{byScope: map[scopeKey]*leaseState{}, leases: map[leaseRef]cachedLease{}, resuming: map[string]int{}}
}

// state is scope's state, made when it has none; s.mu is held. A caller
// that may leave it zero calls tidy.
func (s *scopes) state(scope scopeKey) *leaseState {
	l := s.byScope[scope]
	if l == nil {
		l = &leaseState{}
		s.byScope[scope] = l
	}
	return l
}

// peek is scope's state, or the zero state; s.mu is held.
func (s *scopes) peek(scope scopeKey) leaseState {
	if l := s.byScope[scope]; l != nil {
		return *l
	}
	return leaseState{}
}

// tidy drops scope's entry once its state is zero; s.mu is held.
func (s *scopes) tidy(scope scopeKey) {
	if l := s.byScope[scope]; l != nil && l.zero() {
		delete(s.byScope, scope)
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
func (s *scopes) needsCleanup(scope scopeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.peek(scope)
	return l.closing || l.unconfirmed || l.leftover
}

// refuses reports whether new work on scope is refused: the driver is
// shutting down or the scope needs cleanup.
func (s *scopes) refuses(scope scopeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusesLocked(scope)
}

func (s *scopes) refusesLocked(scope scopeKey) bool {
	l := s.peek(scope)
	return s.shuttingDown || l.closing || l.unconfirmed
}

// enter registers call on scope, unless new work there is refused.
func (s *scopes) enter(scope scopeKey, tc *trackedCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusesLocked(scope) {
		return false
	}
	l := s.state(scope)
	if l.calls == nil {
		l.calls = map[*trackedCall]struct{}{}
	}
	l.calls[tc] = struct{}{}
	return true
}

// leave unregisters call, then marks it done.
func (s *scopes) leave(scope scopeKey, tc *trackedCall) {
	s.mu.Lock()
	if l := s.byScope[scope]; l != nil {
		delete(l.calls, tc)
		s.tidy(scope)
	}
	s.mu.Unlock()
	close(tc.done)
}

// poison marks scope's process containment unproven, until its sandbox is
// destroyed (confirm).
func (s *scopes) poison(scope scopeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state(scope).unconfirmed = true
}

func (s *scopes) poisoned(scope scopeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peek(scope).unconfirmed
}

// confirm clears scope's poison and leftover mark: its sandbox is gone.
func (s *scopes) confirm(scope scopeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.byScope[scope]; l != nil {
		l.unconfirmed, l.leftover = false, false
		s.tidy(scope)
	}
}

// markLeftover records that a session's process on scope may still run
// (its creation or its termination could not be confirmed): the sandbox
// is not kept for reuse, and resume waits until it is destroyed (confirm).
// Commands and syncs on the lease go on.
func (s *scopes) markLeftover(scope scopeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state(scope).leftover = true
}

// hasLeftover reports whether markLeftover was called for scope since its
// sandbox was last destroyed.
func (s *scopes) hasLeftover(scope scopeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peek(scope).leftover
}

// cache remembers lease id, acquired or resumed here by k's company and
// environment; it replaces only that environment's entry for id.
func (s *scopes) cache(k *call, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.shuttingDown {
		s.leases[leaseRef{k.companyID, k.environmentID, id}] = cachedLease{k.companyID, k.environmentID, k.cfg, k.scope(id)}
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
func (s *scopes) forget(ref leaseRef, scope scopeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[ref]; ok && l.scope == scope {
		delete(s.leases, ref)
	}
}

// addChannel registers a session channel on scope, unless new work there
// is refused.
func (s *scopes) addChannel(scope scopeKey, ch *channel.Channel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusesLocked(scope) {
		return false
	}
	l := s.state(scope)
	if l.channels == nil {
		l.channels = map[*channel.Channel]struct{}{}
	}
	l.channels[ch] = struct{}{}
	return true
}

// dropChannel unregisters a channel that is over.
func (s *scopes) dropChannel(scope scopeKey, ch *channel.Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.byScope[scope]; l != nil {
		delete(l.channels, ch)
		s.tidy(scope)
	}
}

// channelsOf returns the session channels open on scope.
func (s *scopes) channelsOf(scope scopeKey) []*channel.Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.peek(scope).channels))
}

// beginClosing marks scope as being released or destroyed; only one such
// call at a time, until endClosing.
func (s *scopes) beginClosing(scope scopeKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.state(scope)
	if l.closing {
		return errCleanupInProgress
	}
	l.closing = true
	return nil
}

func (s *scopes) endClosing(scope scopeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.byScope[scope]; l != nil {
		l.closing = false
		s.tidy(scope)
	}
}

// calls returns the calls in flight on scope.
func (s *scopes) calls(scope scopeKey) []*trackedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.peek(scope).calls))
}

// shutdown refuses all new work, forgets the cached leases and returns
// every call in flight and every open session channel.
func (s *scopes) shutdown() ([]*trackedCall, []*channel.Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuttingDown = true
	clear(s.leases)
	var calls []*trackedCall
	var chans []*channel.Channel
	for _, l := range s.byScope {
		calls = slices.AppendSeq(calls, maps.Keys(l.calls))
		chans = slices.AppendSeq(chans, maps.Keys(l.channels))
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
