package state

import "sync"

// SetupSession is an interactive setup session of a driver.
type SetupSession struct {
	ProviderLeaseID   string
	SessionID         string
	EnvironmentID     string
	Image             string
	SourceTemplateRef *string
	ExpiresAt         *string
	Status            string
	CapturedRef       *string
}

// Template is a captured template.
type Template struct {
	Ref                 string
	Image               string
	SourceTemplateRef   *string
	PreviousTemplateRef *string
	Deleted             bool
}

// Scope is who a record belongs to: the company and environment of the
// call that made it. To a call from another scope the record does not
// exist, so one tenant can neither see nor change another's.
type Scope struct {
	CompanyID     string
	EnvironmentID string
}

type sessionKey struct {
	owner Scope
	id    string
}

type templateKey struct {
	companyID string
	ref       string
}

// Setups keeps setup sessions, owned by a company's environment, and
// templates, owned by a company (an environment of the company may use a
// template another captured). Methods return copies, so a caller never
// shares a record with another goroutine.
type Setups struct {
	mu        sync.Mutex
	sessions  map[sessionKey]*SetupSession
	templates map[templateKey]*Template
}

// NewSetups returns an empty store.
func NewSetups() *Setups {
	return &Setups{sessions: map[sessionKey]*SetupSession{}, templates: map[templateKey]*Template{}}
}

// Session returns owner's session with id.
func (s *Setups) Session(owner Scope, id string) (SetupSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[sessionKey{owner, id}]
	if !ok {
		return SetupSession{}, false
	}
	return *v, true
}

// StartSession stores v for owner unless owner has a session with its id;
// it returns the stored session either way.
func (s *Setups) StartSession(owner Scope, v SetupSession) SetupSession {
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
func (s *Setups) UpdateSession(owner Scope, id string, fn func(*SetupSession) error) (SetupSession, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[sessionKey{owner, id}]
	if !ok {
		return SetupSession{}, false, nil
	}
	if err := fn(v); err != nil {
		return *v, true, err
	}
	return *v, true, nil
}

// PutTemplate stores or overwrites companyID's template t.
func (s *Setups) PutTemplate(companyID string, t Template) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates[templateKey{companyID, t.Ref}] = &t
}

// DeleteTemplate soft-deletes companyID's template ref. It reports whether
// a live template was deleted now: a second delete reports false, and so
// does a delete by another company.
func (s *Setups) DeleteTemplate(companyID, ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[templateKey{companyID, ref}]
	if !ok || t.Deleted {
		return false
	}
	t.Deleted = true
	return true
}

// Template returns companyID's template ref.
func (s *Setups) Template(companyID, ref string) (Template, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[templateKey{companyID, ref}]
	if !ok {
		return Template{}, false
	}
	return *t, true
}
