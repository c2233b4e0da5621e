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
		lines(`{"hello":1}`, `{"i":0,"p":100}`, `{"i":0,"o":"/wDDqQo="}`, `{"i":1,"e":"4oKs8J+YgP4="}`, `{"i":0,"x":0}`, `{"i":1,"x":137,"t":1}`),
		lines(`{"i":0,"err":"EAGAIN"}`),
		lines(`{"i":3,"x":0}`, `{"i":-1,"p":1}`),
		lines(`{"i":0,"o":"QQ"}`),
		lines(`{"i":0}`, `{"hello":1}`),
		`{"hello":1}`,
		"\n\n",
		lines(`{"i":1e0,"x":1}`, `{"i":0,"x":1e100}`),
	} {
		f.Add(uint8(2), []byte(seed), uint(len(seed)/2))
	}
	// A line over the bound, its newline in the same write or the next.
	long := lines(`{"i":0,"o":"` + strings.Repeat("A", maxLine) + `"}`)
	f.Add(uint8(1), []byte(long), uint(len(long)-1))
	f.Fuzz(func(t *testing.T, n uint8, data []byte, cut uint) {
		commands := int(n % 5)
		whole, wholeErr := decodeAll(commands, [][]byte{data})
		k := int(cut % uint(len(data)+1))
		split, splitErr := decodeAll(commands, [][]byte{data[:k], data[k:]})
		for _, err := range []error{wholeErr, splitErr} {
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
		}
		for _, ev := range append(whole, split...) {
			if ev.Kind != Hello && (ev.Index < 0 || ev.Index >= commands) {
				t.Fatalf("event %+v about command %d of %d", ev, ev.Index, commands)
			}
		}
		if (wholeErr == nil) != (splitErr == nil) {
			t.Fatalf("in one write: %v; cut at %d: %v", wholeErr, k, splitErr)
		}
		if diff := cmp.Diff(whole, split, equalBytes); diff != "" {
			t.Fatalf("events in one write (-) and cut at %d (+):\n%s", k, diff)
		}
	})
}
