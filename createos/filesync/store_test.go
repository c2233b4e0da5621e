package filesync

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/delta"
)

// logged is a context whose logger writes to the returned buffer.
func logged(t *testing.T) (context.Context, *bytes.Buffer) {
	var buf bytes.Buffer
	return zerolog.New(&buf).WithContext(t.Context()), &buf
}

func TestStoreFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		mode     string
		dir      string
		maxBytes int64 // as read; below 0 is castore.DefaultMaxBytes when the store opens
		whole    bool
	}{
		{"nothing set", nil, "", "", -1, false},
		{"whole", map[string]string{SyncEnv: "whole"}, SyncWhole, "", -1, true},
		{"auto", map[string]string{SyncEnv: "auto"}, SyncAuto, "", -1, false},
		{"an unknown mode is auto", map[string]string{SyncEnv: "WHOLE"}, "WHOLE", "", -1, false},
		{"a directory", map[string]string{StoreDirEnv: "/var/store"}, "", "/var/store", -1, false},
		{"a bound in MiB", map[string]string{StoreMBEnv: "3"}, "", "", 3 << 20, false},
		{"no bound", map[string]string{StoreMBEnv: "0"}, "", "", 0, false},
		{"a negative bound is the default", map[string]string{StoreMBEnv: "-1"}, "", "", -1, false},
		{"a bound that is no number is the default", map[string]string{StoreMBEnv: "2G"}, "", "", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StoreFromEnv(func(k string) string { return tc.env[k] })
			if s.Mode != tc.mode || s.Dir != tc.dir || s.MaxBytes != tc.maxBytes || s.whole() != tc.whole {
				t.Errorf("got mode %q dir %q bound %d whole %v; want %q %q %d %v",
					s.Mode, s.Dir, s.MaxBytes, s.whole(), tc.mode, tc.dir, tc.maxBytes, tc.whole)
			}
		})
	}
}

// Incremental is nil where mappings go whole: by the mode, a store that
// keeps nothing, or one that cannot be opened (logged once, without its
// path); else it carries the store's bucket, bound, belief and node.
func TestStoreIncremental(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		mode, dir   string // dir "": a fresh one
		maxBytes    int64
		incremental bool
		warns       int // "store unavailable" lines after two calls
	}{
		{"auto", SyncAuto, "", -1, true, 0},
		{"an unknown mode is auto", "other", "", 1 << 20, true, 0},
		{"whole", SyncWhole, "", -1, false, 0},
		{"a store that keeps nothing", SyncAuto, "", 0, false, 0},
		{"a store that cannot be opened", SyncAuto, filepath.Join(file, "store"), -1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Mode: tc.mode, Dir: tc.dir, MaxBytes: tc.maxBytes, Node: "node22"}
			if s.Dir == "" {
				s.Dir = t.TempDir()
			}
			defer s.Close()
			ctx, logs := logged(t)
			for range 2 {
				inc := s.Incremental(ctx, "account/sb-1", "sb-1", "company-a")
				if (inc != nil) != tc.incremental {
					t.Fatalf("incremental %v, want %v", inc != nil, tc.incremental)
				}
				if inc == nil {
					continue
				}
				if inc.Store == nil || inc.Held == nil || inc.Fallback == nil || inc.Node != s.Node {
					t.Errorf("incremental %+v: want the store's bucket, a belief, a fallback and node %q", inc, s.Node)
				}
				if max := s.MaxBytes; max > 0 && (inc.KeepMax <= 0 || inc.KeepMax > max) {
					t.Errorf("keeps at most %d of a transfer, a store of %d", inc.KeepMax, max)
				}
			}
			if n := strings.Count(logs.String(), "CreateOS sync store unavailable"); n != tc.warns {
				t.Errorf("%d warnings, want %d: %s", n, tc.warns, logs)
			}
			if strings.Contains(logs.String(), file) {
				t.Errorf("a warning names the host path: %s", logs)
			}
		})
	}
}

// Each sandbox's belief is its own and lasts from call to call; Created
// starts a sandbox's belief known empty (no index to read), in auto mode
// only.
func TestStoreBeliefs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    string
		created bool
		known   bool // the first call's belief needs no index
	}{
		{"never seen", SyncAuto, false, false},
		{"created", SyncAuto, true, true},
		{"created while whole", SyncWhole, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Mode: tc.mode, Dir: t.TempDir(), MaxBytes: -1}
			defer s.Close()
			if tc.created {
				s.Created("account/sb-1")
			}
			s.Mode = SyncAuto // what the first incremental call finds
			a := s.Incremental(t.Context(), "account/sb-1", "sb-1", "company-a")
			if a.Held.isKnown() != tc.known {
				t.Errorf("known %v, want %v", a.Held.isKnown(), tc.known)
			}
			if again := s.Incremental(t.Context(), "account/sb-1", "sb-1", "company-a"); again.Held != a.Held {
				t.Error("a second call has another belief of the same sandbox")
			}
			if other := s.Incremental(t.Context(), "account/sb-2", "sb-2", "company-a"); other.Held == a.Held {
				t.Error("two sandboxes share a belief")
			}
		})
	}
}

// A fallback reason is logged once per sandbox; the reasons remembered are
// bounded (maxFellFor), after which they may be logged again.
func TestStoreLogsEachFallbackOnce(t *testing.T) {
	s := &Store{Dir: t.TempDir(), MaxBytes: -1}
	defer s.Close()
	ctx, logs := logged(t)
	a := s.Incremental(ctx, "account/sb-1", "sb-1", "company-a")
	b := s.Incremental(ctx, "account/sb-2", "sb-2", "company-a")
	for _, step := range []struct {
		inc    *Incremental
		reason string
		logged bool
	}{
		{a, ReasonNoHelper, true},
		{a, ReasonNoHelper, false},
		{a, ReasonIndex, true},
		{b, ReasonNoHelper, true},
		{b, ReasonIndex, true},
		{b, ReasonIndex, false},
	} {
		before := strings.Count(logs.String(), "\n")
		step.inc.Fallback(step.reason)
		if got := strings.Count(logs.String(), "\n") > before; got != step.logged {
			t.Errorf("%q: logged %v, want %v", step.reason, got, step.logged)
		}
	}
	if !strings.Contains(logs.String(), `"sandbox":"sb-2"`) || !strings.Contains(logs.String(), ReasonIndex) {
		t.Errorf("the log names neither the sandbox nor the reason: %s", logs)
	}
	for i := range maxFellFor {
		s.firstFall("k", string(rune(i)))
	}
	if len(s.fellFor) > maxFellFor {
		t.Errorf("%d reasons remembered, at most %d", len(s.fellFor), maxFellFor)
	}
}

// Close closes the worker's store if it was opened, and is harmless if it
// was not.
func TestStoreClose(t *testing.T) {
	unopened := &Store{}
	if err := unopened.Close(); err != nil {
		t.Errorf("an unopened store: %v", err)
	}
	s := &Store{Dir: t.TempDir(), MaxBytes: castore.DefaultMaxBytes}
	inc := s.Incremental(t.Context(), "k", "sb-1", "company-a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := inc.Store.Put(delta.Hash{}, strings.NewReader("x"), 1); err == nil {
		t.Error("the store still keeps content after Close")
	}
}
