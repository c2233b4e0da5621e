package fake

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Redacted placeholders: the fake never shows a real host, port or command.
const (
	placeholderHost    = "[fake-setup-host-redacted]"
	placeholderPort    = "[fake-port-redacted]"
	placeholderCommand = "ssh sandbox@" + placeholderHost + " -p " + placeholderPort
)

// Setup statuses.
const (
	statusWaiting   = "waiting_for_user"
	statusCapturing = "capturing"
	statusPromoted  = "promoted"
	statusCancelled = "cancelled"
	statusTimedOut  = "timed_out"
	statusFailed    = "failed"
	statusMissing   = "missing"
)

func setupLeaseID(environmentID, sessionID string) string {
	return Key + "-setup://" + encodeComponent(environmentID) + "/" + encodeComponent(sessionID)
}

func templateRef(environmentID, sessionID string) string {
	return "fake-template:" + encodeComponent(environmentID) + ":" + encodeComponent(sessionID)
}

// owner is the scope a setup call acts in: sessions belong to the company's
// environment that started them, and are absent to every other.
func owner(p handlers.BaseParams) scope {
	return scope{CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID}
}

// present is the TypeScript fake provider's presentation of a session:
// raw template refs never appear in it.
func present(s setupRecord, includePayload bool) *handlers.SetupSession {
	id := s.ProviderLeaseID
	out := &handlers.SetupSession{
		ProviderLeaseID: &id,
		Status:          s.Status,
		ExpiresAt:       s.ExpiresAt, // a nil *string is sent as null
		Metadata: handlers.Object{
			"provider":                    Key,
			"image":                       s.Image,
			"sourceTemplateRefRedacted":   s.SourceTemplateRef != nil,
			"setupSessionId":              s.SessionID,
			"redactedConnectionOnly":      true,
			"capturedTemplateRefRedacted": s.CapturedRef != nil,
		},
	}
	if s.Status == statusWaiting {
		user, yes := "sandbox", true
		out.ConnectionSummary = &handlers.ConnectionSummary{
			Type: "ssh", Username: &user, HostRedacted: true, PortRedacted: true, CommandRedacted: &yes,
			Metadata: handlers.Object{"placeholderOnly": true},
		}
		if includePayload {
			cmd := placeholderCommand
			out.ConnectionPayload = &handlers.ConnectionPayload{
				Type: "ssh", Command: &cmd, ExpiresAt: s.ExpiresAt, Metadata: handlers.Object{"placeholderOnly": true},
			}
		}
	}
	return out
}

// StartInteractiveSetup implements handlers.InteractiveSetup. Starting an
// existing session returns it unchanged.
func (d *Driver) StartInteractiveSetup(_ context.Context, p *handlers.StartSetupParams) (*handlers.SetupSession, error) {
	c := parseConfig(p.Config)
	s := d.setups.StartSession(owner(p.BaseParams), setupRecord{
		ProviderLeaseID:   setupLeaseID(p.EnvironmentID, p.SessionID),
		SessionID:         p.SessionID,
		EnvironmentID:     p.EnvironmentID,
		Image:             c.Image,
		SourceTemplateRef: p.SourceTemplateRef,
		ExpiresAt:         p.ExpiresAt,
		Status:            statusWaiting,
	})
	return present(s, true), nil
}

// GetInteractiveSetup implements handlers.InteractiveSetup.
func (d *Driver) GetInteractiveSetup(_ context.Context, p *handlers.GetSetupParams) (*handlers.SetupSession, error) {
	if p.ProviderLeaseID != nil {
		if s, ok := d.setups.Session(owner(p.BaseParams), *p.ProviderLeaseID); ok {
			return present(s, p.IncludeConnectionPayload), nil
		}
	}
	return &handlers.SetupSession{
		ProviderLeaseID: p.ProviderLeaseID,
		Status:          statusMissing,
		Metadata:        handlers.Object{"provider": Key, "found": false},
	}, nil
}

// CaptureTemplate implements handlers.TemplateCapturer.
func (d *Driver) CaptureTemplate(_ context.Context, p *handlers.CaptureTemplateParams) (*handlers.CaptureTemplateResult, error) {
	c := parseConfig(p.Config)
	id := ""
	if p.ProviderLeaseID != nil {
		id = *p.ProviderLeaseID
	}
	var ref string
	var tmpl templateRecord
	s, found, err := d.setups.UpdateSession(owner(p.BaseParams), id, func(s *setupRecord) error {
		switch s.Status {
		case statusCancelled, statusTimedOut, statusFailed:
			return errCaptureStatus(s.Status)
		}
		s.Status = statusCapturing
		ref = templateRef(s.EnvironmentID, s.SessionID)
		source := p.SourceTemplateRef
		if source == nil {
			source = s.SourceTemplateRef
		}
		tmpl = templateRecord{Ref: ref, Image: c.Image, SourceTemplateRef: source, PreviousTemplateRef: p.PreviousTemplateRef}
		s.Status = statusPromoted
		s.CapturedRef = &ref
		return nil
	})
	if !found {
		return nil, errSetupNotFound
	}
	if err != nil {
		return nil, err
	}
	d.setups.PutTemplate(p.CompanyID, tmpl)
	return &handlers.CaptureTemplateResult{
		TemplateRef:  ref,
		TemplateKind: "snapshot",
		Metadata: handlers.Object{
			"provider":                    Key,
			"image":                       tmpl.Image,
			"sourceTemplateRefRedacted":   tmpl.SourceTemplateRef != nil,
			"previousTemplateRefRedacted": tmpl.PreviousTemplateRef != nil,
			"setupSessionId":              s.SessionID,
			"promoted":                    true,
		},
	}, nil
}

// CancelInteractiveSetup implements handlers.InteractiveSetup. The status
// follows the reason; an unknown session reports found:false.
func (d *Driver) CancelInteractiveSetup(_ context.Context, p *handlers.CancelSetupParams) (*handlers.CancelSetupResult, error) {
	status := statusCancelled
	if p.Reason != nil {
		switch *p.Reason {
		case "timed_out":
			status = statusTimedOut
		case "failed":
			status = statusFailed
		}
	}
	found := false
	if p.ProviderLeaseID != nil {
		_, found, _ = d.setups.UpdateSession(owner(p.BaseParams), *p.ProviderLeaseID, func(s *setupRecord) error {
			s.Status = status
			return nil
		})
	}
	return &handlers.CancelSetupResult{Status: status, Metadata: handlers.Object{"provider": Key, "found": found}}, nil
}

// DeleteTemplate implements handlers.TemplateDeleter. Deletion is soft; a
// second delete of the same ref reports deleted:false.
func (d *Driver) DeleteTemplate(_ context.Context, p *handlers.DeleteTemplateParams) (*handlers.DeleteTemplateResult, error) {
	kind := "snapshot"
	if p.TemplateKind != nil {
		kind = *p.TemplateKind
	}
	return &handlers.DeleteTemplateResult{
		Deleted:  d.setups.DeleteTemplate(p.CompanyID, p.TemplateRef),
		Metadata: handlers.Object{"provider": Key, "templateRef": p.TemplateRef, "templateKind": kind},
	}, nil
}
