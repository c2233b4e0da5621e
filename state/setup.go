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

// Setups keeps setup sessions and templates. Methods return copies, so a
// caller never shares a record with another goroutine.
type Setups struct {
	mu        sync.Mutex
	sessions  map[string]*SetupSession
	templates map[string]*Template
}

// NewSetups returns an empty store.
func NewSetups() *Setups {
	return &Setups{sessions: map[string]*SetupSession{}, templates: map[string]*Template{}}
}

// Session returns the session with id.
func (s *Setups) Session(id string) (SetupSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[id]
	if !ok {
		return SetupSession{}, false
	}
	return *v, true
}

// StartSession stores v unless a session with its id exists; it returns
// the stored session either way.
func (s *Setups) StartSession(v SetupSession) SetupSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sessions[v.ProviderLeaseID]; ok {
		return *old
	}
	s.sessions[v.ProviderLeaseID] = &v
	return v
}

// UpdateSession applies fn to the session with id under the lock and
// returns the result; ok is false when there is no such session.
func (s *Setups) UpdateSession(id string, fn func(*SetupSession) error) (SetupSession, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[id]
	if !ok {
		return SetupSession{}, false, nil
	}
	if err := fn(v); err != nil {
		return *v, true, err
	}
	return *v, true, nil
}

// PutTemplate stores or overwrites t.
func (s *Setups) PutTemplate(t Template) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates[t.Ref] = &t
}

// DeleteTemplate soft-deletes ref. It reports whether a live template was
// deleted now: a second delete of the same ref reports false.
func (s *Setups) DeleteTemplate(ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[ref]
	if !ok || t.Deleted {
		return false
	}
	t.Deleted = true
	return true
}

// Template returns the template with ref.
func (s *Setups) Template(ref string) (Template, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[ref]
	if !ok {
		return Template{}, false
	}
	return *t, true
}
