package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The decoder never panics on what a stream delivers, emits only events
// about its own commands, wraps every error in ErrProtocol, and decodes
// the same however the stream cut the output: in one write or in two.
func FuzzDecoder(f *testing.F) {
	for _, seed := range []string{
		frames(hello, `{"i":0,"p":100}`, `{"i":0,"o":"/wDDqQo="}`, `{"i":1,"p":101}`, `{"i":1,"e":"4oKs8J+YgP4="}`,
			`{"i":0,"x":0}`, `{"i":1,"x":137,"t":1,"k":1}`, `{"z":1}`),
		frames(hello, `{"i":0,"err":"EAGAIN"}`, `{"i":1,"p":3}`, `{"i":1,"x":9,"c":1}`, `{"z":1}`),
		frames(hello, `{"i":3,"p":1}`, `{"i":-1,"p":1}`),
		frames(hello, `{"i":0,"p":1}`, `{"i":0,"o":"QQ"}`),
		frames(`{"i":0}`, hello),
		"noise\npartial" + frames(hello) + nonce[:7],
		nonce + ` {"h":1}`,
		"\n\n",
		frames(hello, `{"i":1e0,"p":1}`, `{"i":0,"p":1e100}`),
	} {
		f.Add(uint8(2), []byte(seed), uint(len(seed)/2))
	}
	// A line over the bound, its newline in the same write or the next.
	long := frames(`{"i":0,"o":"` + strings.Repeat("A", maxLine) + `"}`)
	f.Add(uint8(1), []byte(long), uint(len(long)-1))
	f.Fuzz(func(t *testing.T, n uint8, data []byte, cut uint) {
		commands := int(n % 5)
		whole := decodeAll(commands, [][]byte{data})
		k := int(cut % uint(len(data)+1))
		split := decodeAll(commands, [][]byte{data[:k], data[k:]})
		for _, err := range []error{whole.err, split.err} {
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
		}
		for _, ev := range append(whole.evs, split.evs...) {
			if ev.Kind != Hello && ev.Kind != Bye && (ev.Index < 0 || ev.Index >= commands) {
				t.Fatalf("event %+v about command %d of %d", ev, ev.Index, commands)
			}
		}
		if (whole.err == nil) != (split.err == nil) {
			t.Fatalf("in one write: %v; cut at %d: %v", whole.err, k, split.err)
		}
		if diff := cmp.Diff(whole.evs, split.evs, equalBytes); diff != "" {
			t.Fatalf("events in one write (-) and cut at %d (+):\n%s", k, diff)
		}
		if whole.err == nil && (whole.noise != split.noise || whole.sample != split.sample) {
			t.Fatalf("noise in one write %d %q, cut at %d: %d %q", whole.noise, whole.sample, k, split.noise, split.sample)
		}
	})
}
