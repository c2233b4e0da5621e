package guest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
)

// goObject is the GO object Program declares before guest.js.
func goObject(t *testing.T) map[string]any {
	t.Helper()
	const head = "\"use strict\";\nconst GO = Object.freeze("
	rest, ok := strings.CutPrefix(Program, head)
	if !ok {
		t.Fatalf("Program starts %.80q, want %q", Program, head)
	}
	obj, _, ok := strings.Cut(rest, ");\n")
	if !ok {
		t.Fatal("Program's GO object does not end")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		t.Fatalf("GO object %q: %v", obj, err)
	}
	return m
}

// The program's figures are the Go side's: the GO object holds each
// shared constant at its Go value.
func TestProgramDeclaresTheGoSidesConstants(t *testing.T) {
	got := goObject(t)
	for _, c := range []struct {
		name string
		want any
	}{
		{"MAGIC", Magic},
		{"INDEX_MAGIC", IndexMagic},
		{"MAX_FRAME", float64(MaxFrame)},
		{"MIN_CONTENT", float64(MinContent)},
		{"LEVEL", float64(Level)},
		{"EXIT_STORE_MISS", float64(ExitStoreMiss)},
		{"EXIT_BAD_INPUT", float64(ExitBadInput)},
		{"EXIT_STORE_BAD", float64(ExitStoreBad)},
		{"STORE_BYTES", float64(StoreBytes)},
		{"STORE_ENTRIES", float64(StoreEntries)},
		{"STORE_LOW_BYTES", float64(StoreBytes - StoreBytes/8)},
		{"STORE_LOW_ENTRIES", float64(StoreEntries - StoreEntries/8)},
	} {
		if got[c.name] != c.want {
			t.Errorf("GO.%s = %v, want %v", c.name, got[c.name], c.want)
		}
	}
	if len(got) != len(shared) {
		t.Errorf("GO holds %d names, shared %d", len(got), len(shared))
	}
}

// guest.js reads only names GO declares, and every name GO declares is
// read.
func TestProgramReadsEveryDeclaredConstant(t *testing.T) {
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bGO\.([A-Za-z_]+)`).FindAllStringSubmatch(source, -1) {
		used[m[1]] = true
	}
	var names []string
	for name := range used {
		if _, ok := shared[name]; !ok {
			t.Errorf("guest.js reads GO.%s, which the Go side does not declare", name)
		}
		names = append(names, name)
	}
	for name := range shared {
		if !slices.Contains(names, name) {
			t.Errorf("GO.%s is declared and guest.js never reads it", name)
		}
	}
}

// The sandbox's store evicts down to what the worker's store does.
func TestLowWaterIsTheWorkerStores(t *testing.T) {
	s, err := castore.Open(t.TempDir(), StoreBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := lowWater(StoreBytes), s.MaxContent(); got != want {
		t.Errorf("lowWater(StoreBytes) = %d, the worker's store %d", got, want)
	}
}
