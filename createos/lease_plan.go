package createos

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// leasePlan is what an acquire asks the provider for, worked out before
// any request but the catalog's: the reference's effective rootfs, egress
// and idle window.
type leasePlan struct {
	requestedRootfs *string  // the adapter's or the config's rootfs; nil for the default
	rootfs          *string  // effective: requested, or the catalog's default; nil with a snapshot
	egress          []string // effective: config list plus the run's grants
	autoPause       *int64   // the idle window of a reusable lease, else nil
	// scope tags a sandbox the host can resume (reuseScopeTag); "" for
	// one it never will, which release deletes.
	scope string
}

// plan works out p's lease. With no rootfs and no snapshot configured the
// provider's default is resolved (once per origin and rootfsTTL).
func (d *Driver) plan(ctx context.Context, cfg config.Config, c *api.Client, p *handlers.AcquireLeaseParams) (leasePlan, error) {
	egress, err := config.EffectiveEgress(cfg.EgressAllowlist, p.ExecutionWorkspaceSettings)
	if err != nil {
		return leasePlan{}, err
	}
	lp := leasePlan{requestedRootfs: cfg.EffectiveRootfs(p.AdapterType), egress: egress, autoPause: cfg.EffectiveAutoPause(p)}
	lp.rootfs = lp.requestedRootfs
	if cfg.Snapshot == nil && lp.rootfs == nil {
		def, err := d.rootfs.get(ctx, c)
		if err != nil {
			return leasePlan{}, err
		}
		lp.rootfs = &def
	}
	if lp.autoPause != nil && p.ExecutionWorkspaceID != nil && *p.ExecutionWorkspaceID != "" && p.AgentID != "" {
		lp.scope = reuseScopeTag(p)
	}
	return lp, nil
}

// reuseScopeTag names the host's reuse scope of a lease (paperclipai
// 2026.916.1, environment-runtime.js: a reusable lease is resumed only for
// the same company, environment, execution workspace, agent and adapter):
// "paperclip-" and 24 hex digits of its SHA-256. Only the host's resume
// reaches a reusable sandbox again, and it only looks in that scope.
func reuseScopeTag(p *handlers.AcquireLeaseParams) string {
	b, _ := json.Marshal([]string{p.CompanyID, p.EnvironmentID, *p.ExecutionWorkspaceID, p.AgentID, p.AdapterType})
	sum := sha256.Sum256(b)
	return "paperclip-" + hex.EncodeToString(sum[:12])
}

// The name form of a reusable sandbox: its scope tag, "-" and
// sandboxSuffixLen lowercase hex digits of random suffix (names are unique
// per account). The API has no tags or labels (neither POST /sandboxes nor
// the sandbox list has any), so the exact form is the only proof that this
// driver created a sandbox: sandboxName writes it and isSandboxName, its
// inverse, reads it.
const sandboxSuffixLen = 8

// sandboxName is a new reusable sandbox's provider name in scope.
func sandboxName(scope string) string {
	var b [sandboxSuffixLen / 2]byte
	_, _ = rand.Read(b[:])
	return sandboxNameWith(scope, b)
}

// sandboxNameWith is the name of scope with suffix b.
func sandboxNameWith(scope string, b [sandboxSuffixLen / 2]byte) string {
	return scope + "-" + hex.EncodeToString(b[:])
}

// isSandboxName reports whether name is one sandboxName(scope) can return:
// scope, "-", then exactly sandboxSuffixLen lowercase hex digits and
// nothing more.
func isSandboxName(name, scope string) bool {
	suffix, ok := strings.CutPrefix(name, scope+"-")
	if !ok || scope == "" || len(suffix) != sandboxSuffixLen {
		return false
	}
	for i := 0; i < len(suffix); i++ {
		if c := suffix[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// reap deletes the paused sandboxes of scope that no lease can reach. The
// host resumes a reusable lease of a scope before it acquires a new one
// there, so when it acquires, every paused sandbox left in the scope
// belongs to a lease it will never resume (a failed run's: the host marks
// it failed and neither resumes nor destroys it). A sandbox this worker
// holds (acquired, resumed or resuming, not yet released) is never
// touched, nor is keep, nor any sandbox whose name is not exactly one this
// driver generates for scope (isSandboxName): a look-alike such as
// "<scope>-my-database" is not ours. Deletes go through deleteSandbox: a
// failed one leaves a cleanup mark, a confirmed one removes any. Failures
// are logged, never returned: the new lease is good.
func (d *Driver) reap(ctx context.Context, c *api.Client, scope, keep string) {
	log := zerolog.Ctx(ctx)
	rows, err := c.List(ctx)
	if err != nil {
		log.Warn().Str("error", err.Error()).Msg("CreateOS could not list sandboxes to reap unreachable ones")
		return
	}
	for _, v := range rows {
		if v.ID == keep || v.Status != "paused" || !isSandboxName(v.Name, scope) || d.scopes.holds(v.ID) {
			continue
		}
		if err := d.deleteSandbox(ctx, c, v.ID); err != nil {
			log.Warn().Str("sandbox", v.ID).Str("error", err.Error()).Msg("CreateOS could not delete an unreachable paused sandbox")
			continue
		}
		log.Info().Str("sandbox", v.ID).Msg("CreateOS deleted a paused sandbox no lease can reach")
	}
}

// rootfsTTL is how long the catalog's default is trusted.
const rootfsTTL = 10 * time.Minute

// rootfsCache keeps the catalog's default per origin: it changes rarely,
// and every acquire without a rootfs would otherwise ask.
type rootfsCache struct {
	mu   sync.Mutex
	byOf map[string]rootfsEntry
}

type rootfsEntry struct {
	name string
	at   time.Time
}

func newRootfsCache() *rootfsCache { return &rootfsCache{byOf: map[string]rootfsEntry{}} }

func (r *rootfsCache) get(ctx context.Context, c *api.Client) (string, error) {
	r.mu.Lock()
	e, ok := r.byOf[c.Origin()]
	r.mu.Unlock()
	if ok && time.Since(e.at) < rootfsTTL {
		return e.name, nil
	}
	name, err := c.RootfsDefault(ctx)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.byOf[c.Origin()] = rootfsEntry{name: name, at: time.Now()}
	r.mu.Unlock()
	return name, nil
}
