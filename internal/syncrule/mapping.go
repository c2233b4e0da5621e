package syncrule

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Direction is the way a sync call moves files.
type Direction int

const (
	In  Direction = iota + 1 // environmentSyncIn: host → sandbox
	Out                      // environmentSyncOut: sandbox → host
)

// Mapping is what the rules read of one PluginSyncFileMapping.
type Mapping struct {
	Source, Target string
	Kind           string // "file" or "directory"
	Mode           *uint32
}

// Sides returns the mapping's host-side and sandbox-side paths.
func (m Mapping) Sides(dir Direction) (host, sandbox string) {
	if dir == Out {
		return m.Target, m.Source
	}
	return m.Source, m.Target
}

// Rule names the rule a mapping breaks.
type Rule int

const (
	RuleRequired    Rule = iota + 1 // sourcePath or targetPath is empty
	RuleKind                        // kind is neither "file" nor "directory"
	RuleHostPath                    // the host-side path is not absolute, or holds a NUL
	RuleSandboxPath                 // the sandbox-side path is not an absolute POSIX path, holds a NUL or has a ".." segment
	RuleMode                        // mode is not a permission mode (0 to 0o777)
)

// Error is a broken rule. Its message names the offending value; drivers
// that answer with the messages of the TypeScript plugin they match map
// Rule to those.
type Error struct {
	Rule Rule
	msg  string
}

func (e *Error) Error() string { return e.msg }

func broke(r Rule, format string, args ...any) error {
	return &Error{Rule: r, msg: fmt.Sprintf(format, args...)}
}

// RuleOf is the rule err reports, or 0 when err is not an *Error.
func RuleOf(err error) Rule {
	var e *Error
	if errors.As(err, &e) {
		return e.Rule
	}
	return 0
}

// CheckShape checks what the protocol layer refuses as invalid params:
// both paths present, then a known kind.
func CheckShape(m Mapping) error {
	if m.Source == "" || m.Target == "" {
		return broke(RuleRequired, "sourcePath and targetPath are required")
	}
	return checkKind(m.Kind)
}

// Check checks every rule of one mapping, in one order: kind, host path,
// sandbox path, mode. Where the sandbox path must lie (a lease root, a
// workspace) is the driver's to check after this.
func Check(m Mapping, dir Direction) error {
	if err := checkKind(m.Kind); err != nil {
		return err
	}
	host, sandbox := m.Sides(dir)
	if err := HostPath(host); err != nil {
		return err
	}
	if err := SandboxPath(sandbox); err != nil {
		return err
	}
	if m.Mode != nil && *m.Mode > 0o777 {
		return broke(RuleMode, "mode %#o is not a permission mode from 0 to 0o777", *m.Mode)
	}
	return nil
}

func checkKind(kind string) error {
	if kind != "file" && kind != "directory" {
		return broke(RuleKind, "kind %q must be \"file\" or \"directory\"", kind)
	}
	return nil
}

// HostPath checks a host-side path: absolute, without NUL. Host paths are
// the host's own and are not confined.
func HostPath(p string) error {
	if p == "" || strings.IndexByte(p, 0) >= 0 || !filepath.IsAbs(p) {
		return broke(RuleHostPath, "host path %q is not absolute", p)
	}
	return nil
}

// SandboxPath checks a sandbox-side path (a mapping's, or a post-upload
// command's cwd): an absolute POSIX path without NUL and without any ".."
// segment, even one that would stay inside.
func SandboxPath(p string) error {
	if p == "" || strings.IndexByte(p, 0) >= 0 || !strings.HasPrefix(p, "/") {
		return broke(RuleSandboxPath, "sandbox path %q is not an absolute POSIX path", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return broke(RuleSandboxPath, "sandbox path %q contains a '..' segment", p)
		}
	}
	return nil
}
