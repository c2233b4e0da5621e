package createos

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

var _ handlers.LeaseAuthorizer = (*Driver)(nil)

// AuthorizeLease implements handlers.LeaseAuthorizer: the ownership check
// release, destroy and resume make before they act (callOwner), with no
// request and no change to the driver's state.
func (d *Driver) AuthorizeLease(_ context.Context, c *handlers.LeaseCall) (string, error) {
	bp, _, err := callOwner(c)
	if err != nil {
		return "", err
	}
	return bp.EnvironmentID, nil
}

// callOwner checks that a lease call's caller owns the lease its metadata
// describes (metadataMatches: provider, company, environment, API origin;
// the reference's resume and release check it first) and returns the
// params the call acts with: a destroy's orphan form (environmentId "")
// takes the environment the metadata records (orphanBase). A resume of
// metadata without an origin fingerprint is not refused but unproven: it
// answers expired, touching nothing. Any other mismatch is errNotThisEnv.
func callOwner(c *handlers.LeaseCall) (bp handlers.BaseParams, unproven bool, err error) {
	bp = c.Base
	if c.Action == handlers.LeaseDestroy {
		bp = orphanBase(bp, c.LeaseMetadata)
	}
	ok, err := metadataMatches(&bp, c.LeaseMetadata)
	switch {
	case err != nil:
		return bp, false, err
	case ok:
		return bp, false, nil
	case c.Action == handlers.LeaseResume && !hasFingerprint(c.LeaseMetadata):
		return bp, true, nil
	}
	return bp, false, errNotThisEnv
}
