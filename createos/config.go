package createos

import (
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Config defaults and limits (spec §5).
const (
	// OfficialAPIURL is the only origin the host-level CREATEOS_API_KEY is
	// ever sent to.
	OfficialAPIURL   = "https://api.sb.createos.sh"
	DefaultTimeoutMs = 300000
	maxTimeoutMs     = 86400000
	apiKeyEnv        = "CREATEOS_API_KEY"
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
}

// ParseConfig validates raw with the reference plugin's rules and messages.
func ParseConfig(raw handlers.Object) (Config, error) {
	var c Config
	apiURL, err := text(raw, "apiUrl")
	if err != nil {
		return c, err
	}
	if apiURL == nil {
		return c, newError("CreateOS requires an API URL.")
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
		return c, newError("CreateOS requires a shape from its shape catalog.")
	}
	timeout := int64(DefaultTimeoutMs)
	if v, ok := raw["timeoutMs"]; ok && v != nil {
		f, isNum := number(v)
		if !isNum || math.IsNaN(f) || f != math.Trunc(f) || f < 1 || f > maxTimeoutMs {
			return c, newError("timeoutMs must be an integer between 1 and 86400000.")
		}
		timeout = int64(f)
	}
	reuse := false
	if v, ok := raw["reuseLease"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return c, newError("reuseLease must be a boolean.")
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
	return Config{
		APIURL: origin, APIKey: key, Shape: *shape, Rootfs: rootfs, Region: region,
		TimeoutMs: timeout, ReuseLease: reuse,
	}, nil
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
		return nil, newError(key + " must be a non-empty string.")
	}
	s = strings.TrimSpace(s)
	return &s, nil
}

// number reads a JSON number however it was decoded.
func number(v any) (float64, bool) {
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

var errAPIURLShape = newError("CreateOS API URL must be an HTTPS origin (optionally ending in /v1); HTTP is allowed on loopback only.")

// normalizeAPIURL checks the API URL and returns its origin. The rules are
// those of the reference plugin's WHATWG URL checks.
func normalizeAPIURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "", newError("CreateOS API URL is invalid.")
	}
	scheme := strings.ToLower(u.Scheme)
	// A port alone ("https://:443") is no host.
	if (scheme == "http" || scheme == "https") && u.Hostname() == "" {
		return "", newError("CreateOS API URL is invalid.")
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
	}
}

// timeout is TimeoutMs as a duration.
func (c Config) timeout() time.Duration { return msDuration(c.TimeoutMs) }

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// hostTimeout reads a per-command timeoutMs as the host sends it: any JSON
// number. The host stamps an agent's run timeout (timeoutSec × 1000, no upper
// bound and not always whole) on the agent launch and on every post-upload
// command (adapter-utils execution-target.js, sandbox-managed-runtime.js
// withRunTimeout), so a day or more is ordinary. A positive value is the
// command's own deadline, at least 1 ms (a tiny one such as 1e-7 would
// otherwise round to a deadline already past) and saturating where a
// Duration ends; 0 or less (or NaN) gives it none, and the caller's default
// deadline applies.
func hostTimeout(ms float64) (time.Duration, bool) {
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0, false
	case ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		return math.MaxInt64, true
	}
	return max(time.Duration(ms*float64(time.Millisecond)), time.Millisecond), true
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// resolveAPIKey returns the key to send. The host-level CREATEOS_API_KEY is
// used only for the official endpoint: a custom endpoint gets an explicit key
// or nothing at all.
func resolveAPIKey(c Config, getenv func(string) string) (string, error) {
	if c.APIKey == nil && c.APIURL != OfficialAPIURL {
		return "", newError("Custom CreateOS API endpoints require an explicit environment API key; the host fallback is only available for https://api.sb.createos.sh.")
	}
	var key string
	if c.APIKey != nil {
		key = *c.APIKey
	} else {
		key = strings.TrimSpace(getenv(apiKeyEnv))
	}
	if key == "" || strings.ContainsAny(key, "\r\n\x00") {
		return "", newError("CreateOS requires an API key in the environment config or CREATEOS_API_KEY.")
	}
	return key, nil
}
