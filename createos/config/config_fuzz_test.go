package config

import (
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
)

// configMessages are every message Parse may refuse a config with:
// the reference's, none of which quotes a value from the config.
var configMessages = []string{
	"CreateOS requires an API URL.",
	"CreateOS API URL is invalid.",
	errAPIURLShape.Error(),
	"CreateOS requires a shape from its shape catalog.",
	"timeoutMs must be an integer between 1 and 86400000.",
	"reuseLease must be a boolean.",
	"apiUrl must be a non-empty string.",
	"shape must be a non-empty string.",
	"apiKey must be a non-empty string.",
	"rootfs must be a non-empty string.",
	"region must be a non-empty string.",
}

// Parse, given any JSON object as the host decodes it, either refuses
// it with one of the reference's messages (an *operator.Error), or accepts
// it as a config whose fields keep their rules: an origin that is HTTPS or
// loopback HTTP without credentials, path, query or fragment; trimmed,
// non-blank, NUL-free text; a whole timeoutMs in range. What it accepts
// round-trips: the normalised config, sent as JSON, parses to the same.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{"apiUrl":"https://createos.example.test","apiKey":"k","shape":"s-1vcpu-1gb","timeoutMs":5000}`,
		`{"apiUrl":" https://API.Example.test:443/v1/ ","shape":" s ","rootfs":"tpl","region":"us","reuseLease":true}`,
		`{"apiUrl":"http://[::1]:80/","shape":"s","timeoutMs":86400000,"apiKey":null,"rootfs":null}`,
		`{"apiUrl":"http://localhost:3109/v1","shape":"s","timeoutMs":1}`,
		`{"apiUrl":"http://example.test","shape":"s"}`,
		`{"apiUrl":"https://user:secret@example.test","shape":"s"}`,
		`{"apiUrl":"https://example.test/v2","shape":"s"}`,
		`{"apiUrl":"https://example.test/?q#f","shape":"s"}`,
		`{"apiUrl":"mailto:x@example.test","shape":"s"}`,
		`{"apiUrl":"https://example.test","shape":"s","timeoutMs":1.5}`,
		`{"apiUrl":"https://example.test","shape":"s","timeoutMs":0}`,
		`{"apiUrl":"https://example.test","shape":"s","timeoutMs":86400001}`,
		`{"apiUrl":"https://example.test","shape":"s","timeoutMs":"5000"}`,
		`{"apiUrl":"https://example.test","shape":"s","reuseLease":"yes"}`,
		`{"apiUrl":"https://example.test","shape":"\u0000"}`,
		`{"apiUrl":"https://example.test","shape":"  ","apiKey":"secret-key-value"}`,
		`{"apiUrl":"https://example.test","shape":"s","apiKey":7}`,
		`{"apiUrl":"https://%zz","shape":"s"}`,
		`{"shape":"s"}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw handlers.Object
		if json.Unmarshal(data, &raw) != nil || raw == nil {
			return // the host sends an object; decodeParams refuses the rest
		}
		c, err := Parse(raw)
		if err != nil {
			if e, ok := err.(*operator.Error); !ok || !slices.Contains(configMessages, e.Error()) {
				t.Fatalf("refused with %T %q, not a reference message", err, err)
			}
			return
		}
		checkConfig(t, c)
		b, err := json.Marshal(c.Normalized())
		if err != nil {
			t.Fatal(err)
		}
		var again handlers.Object
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatal(err)
		}
		c2, err := Parse(again)
		if err != nil || !reflect.DeepEqual(c2, c) {
			t.Fatalf("normalised config %s parsed to %+v, %v; want %+v", b, c2, err, c)
		}
	})
}

// checkConfig fails unless c keeps the rules of an accepted config.
func checkConfig(t *testing.T, c Config) {
	t.Helper()
	u, err := url.Parse(c.APIURL)
	switch {
	case err != nil || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Host == "":
		t.Fatalf("apiUrl %q is not an origin", c.APIURL)
	case u.Scheme != "https" && !(u.Scheme == "http" && slices.Contains([]string{"localhost", "127.0.0.1", "::1"}, u.Hostname())):
		t.Fatalf("apiUrl %q is neither HTTPS nor loopback HTTP", c.APIURL)
	case c.TimeoutMs < 1 || c.TimeoutMs > MaxTimeoutMs:
		t.Fatalf("timeoutMs %d", c.TimeoutMs)
	}
	for name, v := range map[string]*string{"shape": &c.Shape, "apiKey": c.APIKey, "rootfs": c.Rootfs, "region": c.Region} {
		if v != nil && (*v == "" || strings.TrimSpace(*v) != *v || strings.ContainsRune(*v, 0)) {
			t.Fatalf("%s %q is not trimmed, non-blank, NUL-free text", name, *v)
		}
	}
}
