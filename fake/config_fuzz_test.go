package fake

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// FuzzParseConfig parses any JSON object as a fake config. Parsing never
// fails and keeps its rules (a non-blank image without surrounding space,
// a finite timeout, an output limit of at least one byte, a path of
// absolute directories without ':' or NUL, or refused), and the
// normalised config validateConfig answers parses back to the same config
// with no warning the original did not have.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"image":"  ubuntu:24.04 ","timeoutMs":1e-7,"reuseLease":true}`,
		`{"image":"","timeoutMs":"5","maxOutputBytes":0.5}`, `{"timeoutMs":-1,"maxOutputBytes":2147483647}`,
		`{"image":7,"reuseLease":"yes","maxOutputBytes":1e300}`, `{"image":"\t\n"}`,
		`{"path":["/opt/bin","/usr/local/bin"]}`, `{"path":[]}`, `{"path":["bin",7,"/a:b"]}`, `{"path":"/opt/bin"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var raw handlers.Object
		if json.Unmarshal([]byte(data), &raw) != nil || raw == nil {
			return
		}
		c := parseConfig(raw)
		if c.Image == "" || c.Image != strings.TrimSpace(c.Image) {
			t.Fatalf("%s: image %q", data, c.Image)
		}
		if c.TimeoutMs != c.TimeoutMs || c.TimeoutMs > 1e308 || c.TimeoutMs < -1e308 {
			t.Fatalf("%s: timeoutMs %v is not finite", data, c.TimeoutMs)
		}
		if c.MaxOutputBytes < 1 {
			t.Fatalf("%s: maxOutputBytes %d", data, c.MaxOutputBytes)
		}
		if len(c.errs) > 0 { // refused: nothing is normalised
			if c.Path != nil || c.check() == nil {
				t.Fatalf("%s: refused path kept as %q (check %v)", data, c.Path, c.check())
			}
			return
		}
		for _, d := range c.Path {
			if !strings.HasPrefix(d, "/") || strings.ContainsAny(d, ":\x00") {
				t.Fatalf("%s: path entry %q accepted", data, d)
			}
		}
		b, err := json.Marshal(c.normalized())
		if err != nil {
			t.Fatalf("%s: normalised config cannot be encoded: %v", data, err)
		}
		var again handlers.Object
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatal(err)
		}
		if c2 := parseConfig(again); !reflect.DeepEqual(c, c2) {
			t.Fatalf("%s: normalised %s parses as %+v, not %+v", data, b, c2, c)
		}
		had := c.warnings(raw)
		for _, w := range parseConfig(again).warnings(again) {
			if !slices.Contains(had, w) {
				t.Fatalf("%s: normalised %s warns %q, which the original did not", data, b, w)
			}
		}
	})
}
