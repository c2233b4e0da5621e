package config

import (
	"math"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

func baseConfig(over handlers.Object) handlers.Object {
	c := handlers.Object{"apiUrl": "https://createos.example.test", "apiKey": "test-secret", "shape": "test-shape", "timeoutMs": float64(5000)}
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// "normalizes /v1 URLs and keeps the shape explicit"
func TestConfigNormalizesV1URLsAndKeepsShapeExplicit(t *testing.T) {
	for in, want := range map[string]string{
		"https://createos.example.test/v1/":   "https://createos.example.test",
		"https://createos.example.test/v1":    "https://createos.example.test",
		"https://createos.example.test/":      "https://createos.example.test",
		" https://API.Example.test:443/v1 ":   "https://api.example.test",
		"https://api.example.test:8443":       "https://api.example.test:8443",
		"http://127.0.0.1:3109":               "http://127.0.0.1:3109",
		"http://localhost/v1/":                "http://localhost",
		"http://[::1]:80/":                    "http://[::1]",
		"https://api.sb.createos.sh/v1/":      OfficialAPIURL,
		"https://createos.example.test/v1/?#": "https://createos.example.test",
	} {
		c, err := Parse(baseConfig(handlers.Object{"apiUrl": in}))
		if err != nil || c.APIURL != want {
			t.Errorf("apiUrl %q: got %q, %v; want %q", in, c.APIURL, err, want)
		}
	}
	for _, shape := range []any{"", "  ", nil} {
		_, err := Parse(baseConfig(handlers.Object{"shape": shape}))
		if err == nil || !strings.Contains(err.Error(), "shape") {
			t.Errorf("shape %q: err %v, want one naming shape", shape, err)
		}
	}
	_, err := Parse(baseConfig(handlers.Object{"shape": nil}))
	if err == nil || err.Error() != "CreateOS requires a shape from its shape catalog." {
		t.Errorf("missing shape: %v", err)
	}
	_, err = Parse(baseConfig(handlers.Object{"shape": ""}))
	if err == nil || err.Error() != "shape must be a non-empty string." {
		t.Errorf("blank shape: %v", err)
	}
}

// "rejects unsafe API URL %s"
func TestConfigRejectsUnsafeAPIURL(t *testing.T) {
	for _, u := range []string{
		"https://user:secret@host.test", "https://host.test/?key=secret", "http://remote.test",
		"file:///tmp/socket", "https://host.test/other", "https://host.test/#frag", "ftp://host.test",
	} {
		_, err := Parse(baseConfig(handlers.Object{"apiUrl": u}))
		if err == nil || err.Error() != errAPIURLShape.Error() {
			t.Errorf("%s: err %v", u, err)
		}
		if err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "host.test")) {
			t.Errorf("%s: error echoes the URL: %v", u, err)
		}
	}
	// A port without a host is no host (the WHATWG parser refuses it); it
	// was taken for the origin "https://".
	for _, u := range []string{"not a url", "host.test", "https://", "://x", "https://:443", "http://:8080", "https://[]"} {
		_, err := Parse(baseConfig(handlers.Object{"apiUrl": u}))
		if err == nil || err.Error() != "CreateOS API URL is invalid." {
			t.Errorf("%q: err %v", u, err)
		}
	}
	_, err := Parse(baseConfig(handlers.Object{"apiUrl": nil}))
	if err == nil || err.Error() != "CreateOS requires an API URL." {
		t.Errorf("missing apiUrl: %v", err)
	}
	_, err = Parse(baseConfig(handlers.Object{"apiUrl": float64(3)}))
	if err == nil || err.Error() != "apiUrl must be a non-empty string." {
		t.Errorf("numeric apiUrl: %v", err)
	}
}

// "rejects invalid timeout %s"
func TestConfigRejectsInvalidTimeout(t *testing.T) {
	for _, v := range []any{float64(0), float64(-1), math.NaN(), 1.5, float64(86400001), "500", true} {
		_, err := Parse(baseConfig(handlers.Object{"timeoutMs": v}))
		if err == nil || err.Error() != "timeoutMs must be an integer between 1 and 86400000." {
			t.Errorf("timeoutMs %v: err %v", v, err)
		}
	}
	c, err := Parse(baseConfig(handlers.Object{"timeoutMs": nil}))
	if err != nil || c.TimeoutMs != DefaultTimeoutMs {
		t.Errorf("default timeout: %v %v", c.TimeoutMs, err)
	}
	c, err = Parse(baseConfig(handlers.Object{"timeoutMs": float64(86400000)}))
	if err != nil || c.TimeoutMs != 86400000 {
		t.Errorf("max timeout: %v %v", c.TimeoutMs, err)
	}
}

func TestConfigTextRuleReuseLeaseAndNormalized(t *testing.T) {
	for _, key := range []string{"apiKey", "rootfs", "region"} {
		for _, v := range []any{"", " \t", "a\x00b", float64(1), []any{"x"}} {
			_, err := Parse(baseConfig(handlers.Object{key: v}))
			if err == nil || err.Error() != key+" must be a non-empty string." {
				t.Errorf("%s=%q: err %v", key, v, err)
			}
		}
	}
	_, err := Parse(baseConfig(handlers.Object{"reuseLease": "true"}))
	if err == nil || err.Error() != "reuseLease must be a boolean." {
		t.Errorf("reuseLease string: %v", err)
	}
	c, err := Parse(baseConfig(handlers.Object{"rootfs": " tpl_ready ", "region": "us", "reuseLease": true}))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Normalized()
	want := handlers.Object{"apiUrl": "https://createos.example.test", "apiKey": "test-secret", "shape": "test-shape",
		"rootfs": "tpl_ready", "region": "us", "timeoutMs": int64(5000), "reuseLease": true}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("normalized %s = %#v, want %#v", k, got[k], v)
		}
	}
	c, _ = Parse(baseConfig(handlers.Object{"apiKey": nil}))
	if n := c.Normalized(); n["apiKey"] != nil || n["rootfs"] != nil || n["region"] != nil || n["reuseLease"] != false {
		t.Errorf("unset fields: %#v", n)
	}
}

// "supports explicitly configured fixture keys and an official-endpoint host
// fallback" and "never sends the deployment fallback key to custom endpoint
// %s" at the key-resolution level (the driver test checks no request is
// made).
func TestResolveAPIKey(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "CREATEOS_API_KEY" {
				return v
			}
			return ""
		}
	}
	cfg := func(url string, key any) Config {
		c, err := Parse(baseConfig(handlers.Object{"apiUrl": url, "apiKey": key}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if k, err := ResolveAPIKey(cfg("http://127.0.0.1:3109", "fixture-key"), env("fallback")); err != nil || k != "fixture-key" {
		t.Errorf("loopback explicit: %q %v", k, err)
	}
	if k, err := ResolveAPIKey(cfg("https://api.sb.createos.sh/v1/", nil), env(" fallback \n")); err != nil || k != "fallback" {
		t.Errorf("official fallback: %q %v", k, err)
	}
	if k, err := ResolveAPIKey(cfg("https://api.sb.createos.sh/v1/", "explicit"), env("fallback")); err != nil || k != "explicit" {
		t.Errorf("explicit wins: %q %v", k, err)
	}
	for _, u := range []string{"https://custom.example.test", "https://api.sb.createos.sh.attacker.test", "https://api.sb.createos.sh:8443", "http://127.0.0.1:3109"} {
		_, err := ResolveAPIKey(cfg(u, nil), env("fallback"))
		if err == nil || !strings.Contains(err.Error(), "require an explicit environment API key") {
			t.Errorf("%s: err %v", u, err)
		}
	}
	for _, v := range []string{"", "  ", "a\rb"} {
		_, err := ResolveAPIKey(cfg(OfficialAPIURL, nil), env(v))
		if err == nil || err.Error() != "CreateOS requires an API key in the environment config or CREATEOS_API_KEY." {
			t.Errorf("env %q: err %v", v, err)
		}
	}
	_, err := ResolveAPIKey(cfg(OfficialAPIURL, "a\nb"), env(""))
	if err == nil || strings.Contains(err.Error(), "a\nb") {
		t.Errorf("explicit key with newline: %v", err)
	}
}
