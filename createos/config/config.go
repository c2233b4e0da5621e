package config

import (
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Config defaults and limits (the reference's config.ts).
const (
	// OfficialAPIURL is the only origin the host-level CREATEOS_API_KEY is
	// ever sent to.
	OfficialAPIURL = "https://api.sb.createos.sh"
	// The bounds of timeoutMs, and its value when unset: five minutes.
	DefaultTimeoutMs = 300000
	MaxTimeoutMs     = 86400000
	apiKeyEnv        = "CREATEOS_API_KEY"

	// The bounds of autoPauseAfterSeconds: a minute to a day.
	MinAutoPauseSeconds = 60
	MaxAutoPauseSeconds = 86400

	// MaxRequestsPerMinute bounds requestsPerMinute: the provider's
	// documented limit per caller.
	MaxRequestsPerMinute = 300
)

// Config is a parsed and validated environment config.
type Config struct {
	// APIURL is the normalised origin (scheme://host[:port]).
	APIURL     string
	APIKey     *string
	Shape      string
	Rootfs     *string
	Region     *string
	TimeoutMs  int64
	ReuseLease bool
	// v0.2: the idle window a reusable lease asks the provider for, the
	// root filesystem per adapter type and the base egress allowlist.
	AutoPauseAfterSeconds int64
	RootfsByAdapter       map[string]string
	EgressAllowlist       []string
	// v0.3: a paused sandbox that leases are forked from.
	Snapshot *string
	// RequestsPerMinute is the account's window this config asks for: at
	// most this many requests to this API origin and key in any 60 s
	// (sched.Limiter, which keeps the smallest any config asks for).
	RequestsPerMinute int
}

// DefaultAutoPauseAfterSeconds is the v0.2 idle window of a warm lease.
const DefaultAutoPauseAfterSeconds = 600

// Parse validates raw with the reference plugin's rules and messages.
func Parse(raw handlers.Object) (Config, error) {
	var c Config
	apiURL, err := text(raw, "apiUrl")
	if err != nil {
		return c, err
	}
	if apiURL == nil {
		return c, errNoAPIURL
	}
	origin, err := normalizeAPIURL(*apiURL)
	if err != nil {
		return c, err
	}
	shape, err := text(raw, "shape")
	if err != nil {
		return c, err
	}
	if shape == nil {
		return c, errNoShape
	}
	timeout := int64(DefaultTimeoutMs)
	if v, ok := raw["timeoutMs"]; ok && v != nil {
		f, isNum := Number(v)
		ms, whole := TimeoutMs(f).Whole()
		if !isNum || !whole {
			return c, errTimeoutRange
		}
		timeout = ms
	}
	reuse := false
	if v, ok := raw["reuseLease"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return c, errReuseLease
		}
		reuse = b
	}
	key, err := text(raw, "apiKey")
	if err != nil {
		return c, err
	}
	rootfs, err := text(raw, "rootfs")
	if err != nil {
		return c, err
	}
	region, err := text(raw, "region")
	if err != nil {
		return c, err
	}
	c = Config{
		APIURL: origin, APIKey: key, Shape: *shape, Rootfs: rootfs, Region: region,
		TimeoutMs: timeout, ReuseLease: reuse,
	}
	return c, parseV02(raw, &c)
}

// parseV02 reads the v0.2 and v0.3 fields into c.
func parseV02(raw handlers.Object, c *Config) error {
	var err error
	if c.AutoPauseAfterSeconds, err = autoPause(raw["autoPauseAfterSeconds"]); err != nil {
		return err
	}
	if c.RootfsByAdapter, err = rootfsByAdapter(raw["rootfsByAdapter"]); err != nil {
		return err
	}
	if c.EgressAllowlist, err = allowlist(raw["egressAllowlist"], errEgressList, true); err != nil {
		return err
	}
	if c.Snapshot, err = text(raw, "snapshot"); err != nil {
		return err
	}
	c.RequestsPerMinute, err = requestsPerMinute(raw["requestsPerMinute"])
	return err
}

// requestsPerMinute reads the account's window: an integer in
// [api.MinPerMinute, MaxRequestsPerMinute], api.DefaultPerMinute when unset.
func requestsPerMinute(v any) (int, error) {
	if v == nil {
		return api.DefaultPerMinute, nil
	}
	f, ok := Number(v)
	if !ok || math.IsNaN(f) || f != math.Trunc(f) || f < api.MinPerMinute || f > MaxRequestsPerMinute {
		return 0, errRequestsPerMinute
	}
	return int(f), nil
}

func autoPause(v any) (int64, error) {
	if v == nil {
		return DefaultAutoPauseAfterSeconds, nil
	}
	f, ok := Number(v)
	if !ok || math.IsNaN(f) || f != math.Trunc(f) || f < MinAutoPauseSeconds || f > MaxAutoPauseSeconds {
		return 0, errAutoPauseRange
	}
	return int64(f), nil
}

// cleanLine is s trimmed when it is non-blank and holds no NUL, CR or LF.
func cleanLine(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || strings.TrimSpace(s) == "" || strings.ContainsAny(s, "\x00\r\n") {
		return "", false
	}
	return strings.TrimSpace(s), true
}

func rootfsByAdapter(v any) (map[string]string, error) {
	out := map[string]string{}
	var m map[string]any
	switch t := v.(type) {
	case nil:
		return out, nil
	case map[string]any:
		m = t
	case map[string]string:
		m = make(map[string]any, len(t))
		for k, s := range t {
			m[k] = s
		}
	default:
		return nil, errRootfsMap
	}
	for k, val := range m {
		key, okKey := cleanLine(k)
		rootfs, okVal := cleanLine(val)
		if !okKey || !okVal {
			return nil, errRootfsEntries
		}
		out[key] = rootfs
	}
	return out, nil
}

// allowlist reads an array of clean strings (trimmed), refusing anything
// else with bad; dedupe keeps each entry's first occurrence.
func allowlist(v any, bad error, dedupe bool) ([]string, error) {
	var items []any
	switch t := v.(type) {
	case nil:
		return []string{}, nil
	case []any:
		items = t
	case []string:
		for _, s := range t {
			items = append(items, s)
		}
	default:
		return nil, bad
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := cleanLine(it)
		if !ok {
			return nil, bad
		}
		if !dedupe || !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// EffectiveRootfs is the v0.2 resolveRootfs: the adapter's root filesystem
// when adapterType is mapped, else config.rootfs (nil when unset).
func (c Config) EffectiveRootfs(adapterType string) *string {
	if r, ok := c.RootfsByAdapter[adapterType]; ok && adapterType != "" {
		return &r
	}
	return c.Rootfs
}

// EffectiveAutoPause is the idle window a lease asks for: the config's when
// the lease is reusable and tied to an issue or execution workspace (login
// leases carry neither and stay disposable), else none.
func (c Config) EffectiveAutoPause(p *handlers.AcquireLeaseParams) *int64 {
	hasIssue := p.IssueID != nil && *p.IssueID != ""
	hasWorkspace := p.ExecutionWorkspaceID != nil && *p.ExecutionWorkspaceID != ""
	if !c.ReuseLease || !hasIssue && !hasWorkspace {
		return nil
	}
	v := c.AutoPauseAfterSeconds
	return &v
}

// EffectiveEgress is resolveEgressAllowlist: the config's list, then the
// run's networkEgress grants (allowFqdns, allowCidrs), each entry once in
// first-occurrence order; with more than one entry every "*" is dropped.
func EffectiveEgress(base []string, settings handlers.Object) ([]string, error) {
	out := slices.Clone(base)
	if raw, ok := settings["networkEgress"]; ok && raw != nil {
		ne, isObj := asJSONObject(raw)
		if !isObj {
			return nil, errNetworkEgress
		}
		for _, key := range []string{"allowFqdns", "allowCidrs"} {
			grants, err := allowlist(ne[key], errGrantList, false)
			if err != nil {
				return nil, err
			}
			out = append(out, grants...)
		}
	}
	uniq := make([]string, 0, len(out))
	for _, s := range out {
		if !slices.Contains(uniq, s) {
			uniq = append(uniq, s)
		}
	}
	if len(uniq) > 1 {
		uniq = slices.DeleteFunc(uniq, func(s string) bool { return s == "*" })
	}
	return uniq, nil
}

// asJSONObject is v as a decoded JSON object.
func asJSONObject(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case map[string]any:
		return t, true
	}
	return nil, false
}

// text is the reference text(key) rule: absent or null is nil; anything
// else must be a string that is non-blank and NUL-free; it is trimmed.
func text(raw handlers.Object, key string) (*string, error) {
	v, ok := raw[key]
	if !ok || v == nil {
		return nil, nil
	}
	s, isStr := v.(string)
	if !isStr || strings.TrimSpace(s) == "" || strings.ContainsRune(s, 0) {
		return nil, errNotText(key)
	}
	s = strings.TrimSpace(s)
	return &s, nil
}

// Number reads a JSON number however it was decoded.
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// normalizeAPIURL checks the API URL and returns its origin. The rules are
// those of the reference plugin's WHATWG URL checks.
func normalizeAPIURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "", errAPIURL
	}
	scheme := strings.ToLower(u.Scheme)
	// A port alone ("https://:443") is no host.
	if (scheme == "http" || scheme == "https") && u.Hostname() == "" {
		return "", errAPIURL
	}
	host := strings.ToLower(u.Hostname())
	loopback := host == "localhost" || host == "127.0.0.1" || host == "::1"
	if !(scheme == "https" || scheme == "http" && loopback) ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" ||
		!slices.Contains([]string{"", "/", "/v1", "/v1/"}, u.EscapedPath()) {
		return "", errAPIURLShape
	}
	hostport := strings.ToLower(u.Host)
	if port := u.Port(); port != "" && (scheme == "https" && port == "443" || scheme == "http" && port == "80") {
		hostport = strings.TrimSuffix(hostport, ":"+port)
	}
	return scheme + "://" + hostport, nil
}

// Normalized is the config as environmentValidateConfig returns it: every
// field, null where unset.
func (c Config) Normalized() handlers.Object {
	return handlers.Object{
		"apiUrl": c.APIURL, "apiKey": strOrNil(c.APIKey), "shape": c.Shape,
		"rootfs": strOrNil(c.Rootfs), "region": strOrNil(c.Region),
		"timeoutMs": c.TimeoutMs, "reuseLease": c.ReuseLease,
		"autoPauseAfterSeconds": c.AutoPauseAfterSeconds, "rootfsByAdapter": c.RootfsByAdapter,
		"egressAllowlist": c.EgressAllowlist, "snapshot": strOrNil(c.Snapshot),
		"requestsPerMinute": c.RequestsPerMinute,
	}
}

// Timeout is TimeoutMs as a duration.
func (c Config) Timeout() time.Duration { return msDuration(c.TimeoutMs) }

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// ResolveAPIKey returns the key to send. The host-level CREATEOS_API_KEY is
// used only for the official endpoint: a custom endpoint gets an explicit key
// or nothing at all.
func ResolveAPIKey(c Config, getenv func(string) string) (string, error) {
	if c.APIKey == nil && c.APIURL != OfficialAPIURL {
		return "", errCustomEndpointKey
	}
	var key string
	if c.APIKey != nil {
		key = *c.APIKey
	} else {
		key = strings.TrimSpace(getenv(apiKeyEnv))
	}
	if key == "" || strings.ContainsAny(key, "\r\n\x00") {
		return "", errNoAPIKey
	}
	return key, nil
}
