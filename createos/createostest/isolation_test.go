package createostest

import (
	"errors"
	"os"
	"runtime"
	"testing"
)

// gateRecorder is a testing.TB that records how gate ended it.
type gateRecorder struct {
	testing.TB
	fatal, skip bool
}

func (r *gateRecorder) Helper()               {}
func (r *gateRecorder) Fatalf(string, ...any) { r.fatal = true }
func (r *gateRecorder) Skipf(string, ...any)  { r.skip = true }

func TestIsolationGateFailsWhereIsolationIsRequired(t *testing.T) {
	missing := errors.New("no namespaces")
	for _, tc := range []struct {
		name        string
		err         error
		required    bool
		fatal, skip bool
	}{
		{"isolated", nil, true, false, false},
		{"isolated, not required", nil, false, false, false},
		{"missing where required", missing, true, true, false},
		{"missing where not required", missing, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &gateRecorder{TB: t}
			isolationGate(r, tc.err, tc.required)
			if r.fatal != tc.fatal || r.skip != tc.skip {
				t.Errorf("isolationGate(%v, required %v): fatal %v skip %v, want fatal %v skip %v", tc.err, tc.required, r.fatal, r.skip, tc.fatal, tc.skip)
			}
		})
	}
}

func TestIsolationRequired(t *testing.T) {
	t.Setenv(RequiredEnv, "1")
	if !IsolationRequired() {
		t.Errorf("%s=1: isolation not required", RequiredEnv)
	}
	t.Setenv(RequiredEnv, "")
	if want := runtime.GOOS == "linux" && os.Geteuid() == 0; IsolationRequired() != want {
		t.Errorf("%s unset on %s as uid %d: required %v, want %v", RequiredEnv, runtime.GOOS, os.Geteuid(), !want, want)
	}
}
