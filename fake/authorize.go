package fake

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

var _ handlers.LeaseAuthorizer = (*Driver)(nil)

// AuthorizeLease implements handlers.LeaseAuthorizer with the checks the
// call's own method makes before it acts (resumable, callerLease), so a
// refusal reads the same: a release that removes the lease
// (releaseRemoves) and a destroy accept the orphan form, a resume does
// not. It changes nothing.
func (d *Driver) AuthorizeLease(_ context.Context, c *handlers.LeaseCall) (string, error) {
	var l *lease
	var err error
	if c.Action == handlers.LeaseResume {
		l, _, err = d.resumable(c.Base, c.ProviderLeaseID)
	} else {
		removes := c.Action == handlers.LeaseDestroy || releaseRemoves(c.Base.Config)
		d.mu.Lock()
		l, err = d.callerLease(c.Base, c.ProviderLeaseID, removes)
		d.mu.Unlock()
	}
	if err != nil {
		return "", err
	}
	if l == nil {
		return c.Base.EnvironmentID, nil
	}
	return l.environmentID, nil
}
