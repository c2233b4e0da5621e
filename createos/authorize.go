package createos

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

var _ handlers.LeaseAuthorizer = (*Driver)(nil)

// AuthorizeLease implements handlers.LeaseAuthorizer: the ownership check
// release, destroy and resume make before they act (callOwner), with no
// request and no change to the driver's state.
func (d *Driver) AuthorizeLease(_ context.Context, c *handlers.LeaseCall) (string, error) {
	o, err := callOwner(c)
	if err != nil {
		return "", err
	}
	return o.base.EnvironmentID, nil
}

// owner is what callOwner found: the params the call acts with, its
// parsed config, and whether ownership is unproven.
type owner struct {
	base     handlers.BaseParams
	cfg      config.Config
	unproven bool
}

// callOwner checks that a lease call's caller owns the lease its metadata
// describes (owns: provider, company, environment, API origin; the
// reference's resume and release check it first) and returns the params
// the call acts with: a destroy's orphan form (environmentId "") takes the
// environment the metadata records (orphanBase). A resume of metadata
// without an origin fingerprint is not refused but unproven: it answers
// expired, touching nothing. Any other mismatch is errNotThisEnv.
func callOwner(c *handlers.LeaseCall) (owner, error) {
	o := owner{base: c.Base}
	if c.Action == handlers.LeaseDestroy {
		o.base = orphanBase(o.base, c.LeaseMetadata)
	}
	var err error
	if o.cfg, err = config.Parse(o.base.Config); err != nil {
		return o, err
	}
	switch {
	case owns(&o.base, o.cfg, c.LeaseMetadata):
		return o, nil
	case c.Action == handlers.LeaseResume && !hasFingerprint(c.LeaseMetadata):
		o.unproven = true
		return o, nil
	}
	return o, errNotThisEnv
}
