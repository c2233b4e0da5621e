package syncrule

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	mode := func(m uint32) *uint32 { return &m }
	const host, sandbox = "/tmp/host/a", "/paperclip-workspace/a"
	for _, tc := range []struct {
		name  string
		m     Mapping
		dir   Direction
		shape Rule // CheckShape's rule, 0: none
		rule  Rule // Check's rule, 0: none
		msg   string
	}{
		{"file in", Mapping{Source: host, Target: sandbox, Kind: "file"}, In, 0, 0, ""},
		{"directory out", Mapping{Source: sandbox, Target: host, Kind: "directory", Mode: mode(0o700)}, Out, 0, 0, ""},
		{"mode 0", Mapping{Source: host, Target: sandbox, Kind: "file", Mode: mode(0)}, In, 0, 0, ""},
		{"mode 0o777", Mapping{Source: host, Target: sandbox, Kind: "file", Mode: mode(0o777)}, In, 0, 0, ""},
		{"a dot segment is not a '..' one", Mapping{Source: host, Target: "/w/./a", Kind: "file"}, In, 0, 0, ""},
		{"no source", Mapping{Target: sandbox, Kind: "file"}, In, RuleRequired, RuleHostPath, `host path "" is not absolute`},
		{"no target", Mapping{Source: host, Kind: "file"}, In, RuleRequired, RuleSandboxPath, `sandbox path "" is not an absolute POSIX path`},
		{"kind", Mapping{Source: host, Target: sandbox, Kind: "symlink"}, In, RuleKind, RuleKind, `kind "symlink" must be "file" or "directory"`},
		{"kind before paths", Mapping{Source: "rel", Target: "rel", Kind: ""}, In, RuleKind, RuleKind, `kind "" must be "file" or "directory"`},
		{"relative host path in", Mapping{Source: "rel/a", Target: sandbox, Kind: "file"}, In, 0, RuleHostPath, `host path "rel/a" is not absolute`},
		{"relative host path out", Mapping{Source: sandbox, Target: "rel/a", Kind: "file"}, Out, 0, RuleHostPath, `host path "rel/a" is not absolute`},
		{"sides swap out", Mapping{Source: host, Target: sandbox, Kind: "file"}, Out, 0, 0, ""},
		{"host NUL", Mapping{Source: "/a\x00b", Target: sandbox, Kind: "file"}, In, 0, RuleHostPath, `host path "/a\x00b" is not absolute`},
		{"relative sandbox path", Mapping{Source: host, Target: "paperclip-workspace/a", Kind: "file"}, In, 0, RuleSandboxPath, `sandbox path "paperclip-workspace/a" is not an absolute POSIX path`},
		{"sandbox NUL", Mapping{Source: host, Target: "/w/a\x00", Kind: "file"}, In, 0, RuleSandboxPath, `sandbox path "/w/a\x00" is not an absolute POSIX path`},
		{"sandbox dot-dot", Mapping{Source: host, Target: "/w/x/../y", Kind: "file"}, In, 0, RuleSandboxPath, `sandbox path "/w/x/../y" contains a '..' segment`},
		{"sandbox dot-dot out", Mapping{Source: "/w/../../etc", Target: host, Kind: "directory"}, Out, 0, RuleSandboxPath, `sandbox path "/w/../../etc" contains a '..' segment`},
		{"mode", Mapping{Source: host, Target: sandbox, Kind: "file", Mode: mode(0o1000)}, In, 0, RuleMode, "mode 01000 is not a permission mode from 0 to 0o777"},
		{"paths before mode", Mapping{Source: host, Target: "rel", Kind: "file", Mode: mode(0o4755)}, In, 0, RuleSandboxPath, `sandbox path "rel" is not an absolute POSIX path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RuleOf(CheckShape(tc.m)); got != tc.shape {
				t.Errorf("CheckShape rule %d, want %d", got, tc.shape)
			}
			err := Check(tc.m, tc.dir)
			if got := RuleOf(err); got != tc.rule {
				t.Fatalf("Check rule %d (%v), want %d", got, err, tc.rule)
			}
			if tc.rule == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err, tc.msg)
			}
		})
	}
	if RuleOf(errors.New("other")) != 0 || RuleOf(nil) != 0 {
		t.Error("RuleOf of a foreign error")
	}
}
