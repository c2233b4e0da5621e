package fake

import "sync"

// Setup sessions, templates and active executions (executions.go) live in
// worker memory only: a worker that restarts has lost them, by design.

// setupRecord is an interactive setup session of a driver.
type setupRecord struct {
	ProviderLeaseID   string
	SessionID         string
	EnvironmentID     string
	Image             string
	SourceTemplateRef *string
	ExpiresAt         *string
	Status            string
	CapturedRef       *string
}

// templateRecord is a captured template.
type templateRecord struct {
	Ref                 string
	Image               string
	SourceTemplateRef   *string
	PreviousTemplateRef *string
	Deleted             bool
}

// scope is who a record belongs to: the company and environment of the
// call that made it. To a call from another scope the record does not
// exist, so one tenant can neither see nor change another's.
type scope struct {
	CompanyID     string
	EnvironmentID string
}

type sessionKey struct {
	owner scope
	id    string
}

type templateKey struct {
	companyID string
	ref       string
}

// setupStore keeps setup sessions, owned by a company's environment, and
// templates, owned by a company (an environment of the company may use a
// template another captured). Methods return copies, so a caller never
// shares a record with another goroutine.
type setupStore struct {
	mu        sync.Mutex
	sessions  map[sessionKey]*setupRecord
	templates map[templateKey]*templateRecord
}

// newSetupStore returns an empty store.
func newSetupStore() *setupStore {
	return &setupStore{sessions: map[sessionKey]*setupRecord{}, templates: map[templateKey]*templateRecord{}}
}

// Session returns owner's session with id.
func (s *setupStore) Session(owner scope, id string) (setupRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[sessionKey{owner, id}]
	if !ok {
		return setupRecord{}, false
	}
	return *v, true
}

// StartSession stores v for owner unless owner has a session with its id;
// it returns the stored session either way.
func (s *setupStore) StartSession(owner scope, v setupRecord) setupRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey{owner, v.ProviderLeaseID}
	if old, ok := s.sessions[k]; ok {
		return *old
	}
	s.sessions[k] = &v
	return v
}

// UpdateSession applies fn to owner's session with id under the lock and
// returns the result; ok is false when owner has no such session.
func (s *setupStore) UpdateSession(owner scope, id string, fn func(*setupRecord) error) (setupRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[sessionKey{owner, id}]
	if !ok {
		return setupRecord{}, false, nil
	}
	if err := fn(v); err != nil {
		return *v, true, err
	}
	return *v, true, nil
}

// PutTemplate stores or overwrites companyID's template t.
func (s *setupStore) PutTemplate(companyID string, t templateRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates[templateKey{companyID, t.Ref}] = &t
}

// DeleteTemplate soft-deletes companyID's template ref. It reports whether
// a live template was deleted now: a second delete reports false, and so
// does a delete by another company.
func (s *setupStore) DeleteTemplate(companyID, ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[templateKey{companyID, ref}]
	if !ok || t.Deleted {
		return false
	}
	t.Deleted = true
	return true
}

// templateRecord returns companyID's template ref.
func (s *setupStore) Template(companyID, ref string) (templateRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[templateKey{companyID, ref}]
	if !ok {
		return templateRecord{}, false
	}
	return *t, true
}
