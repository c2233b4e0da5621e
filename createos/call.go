package createos

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// call is a call's config, parsed once where the call enters the driver
// and passed down: the config, the client of its API origin and key, and
// whom the call is for. A lease's scope (scopeKey) is named from it. Each
// call builds its client once and drops it with the call: a client holds
// no connection or goroutine of its own (requests go through the driver's
// http.Client and the worker's pacer), so nothing ends it. A cached lease
// (scopes.cache) keeps the parsed config, not the client: a session open
// builds its call from it (bind), as a call with a config does.
type call struct {
	cfg config.Config
	c   *api.Client
	// companyID and environmentID are the caller's (for a destroy of an
	// orphan, the environment its metadata records: orphanBase).
	companyID, environmentID string
}

// parse is the edge of a call that talks to the API: p's config parsed,
// its key resolved and its client built.
func (d *Driver) parse(p *handlers.BaseParams) (*call, error) {
	cfg, err := config.Parse(p.Config)
	if err != nil {
		return nil, err
	}
	return d.bind(p.CompanyID, p.EnvironmentID, cfg)
}

// bind is parse once cfg is parsed, for companyID and environmentID: the
// calls that check lease metadata against the config do so before the key
// is resolved, and a session open binds its lease's cached config.
func (d *Driver) bind(companyID, environmentID string, cfg config.Config) (*call, error) {
	key, err := config.ResolveAPIKey(cfg, d.getenv)
	if err != nil {
		return nil, err
	}
	c := api.New(api.Options{
		Origin: cfg.APIURL, Key: key, Shape: cfg.Shape, Timeout: cfg.Timeout(),
		HTTP: d.http, Pacer: d.pacer, Poll: d.pollInterval, MaxDownload: d.maxDownload, ForkRetry: d.forkRetry,
		PerMinute: cfg.RequestsPerMinute,
	})
	return &call{cfg: cfg, c: c, companyID: companyID, environmentID: environmentID}, nil
}

// timeout is config.timeoutMs: the default deadline of the call's work.
func (k *call) timeout() time.Duration { return k.cfg.Timeout() }

// scopeKey names a lease in the driver's state: company, environment, API
// origin, the hex SHA-256 of the key, and the provider lease id. Two
// tenants whose leases carry the same provider id hold two scopes.
type scopeKey struct {
	companyID, environmentID, origin, keyDigest, lease string
}

// scope is the scope of the call's lease id.
func (k *call) scope(id string) scopeKey {
	return scopeKey{k.companyID, k.environmentID, k.cfg.APIURL, k.c.KeyDigest(), id}
}

// originKey is the lease metadata field that ties a lease to its API
// origin. It holds a fingerprint, never the URL: the reference stores the
// origin itself (apiUrl), but no configured URL may reach metadata here.
const originKey = "apiOriginSha256"

// originFingerprint is the hex SHA-256 of a normalised API origin (the same
// digest the pacer keys its accounts by).
func originFingerprint(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(sum[:])
}

// owns reports whether lease metadata was written by this driver for p's
// company and environment and cfg's API origin. Metadata without the
// origin fingerprint (a reference-style apiUrl, or none) never matches.
func owns(p *handlers.BaseParams, cfg config.Config, md handlers.Object) bool {
	return md["provider"] == Key && md["companyId"] == p.CompanyID &&
		md["environmentId"] == p.EnvironmentID && md[originKey] == originFingerprint(cfg.APIURL)
}

// hasFingerprint reports whether md carries an origin fingerprint at all.
func hasFingerprint(md handlers.Object) bool {
	_, ok := md[originKey].(string)
	return ok
}
