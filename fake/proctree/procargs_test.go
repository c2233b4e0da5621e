package proctree

import (
	"encoding/binary"
	"strings"
	"testing"
)

// procargs builds a kern.procargs2 record as macOS lays it out: argc, the
// executable path, pad NULs, then the strings.
func procargs(argc uint32, path string, pad int, strs ...string) []byte {
	b := binary.NativeEndian.AppendUint32(nil, argc)
	b = append(b, path...)
	b = append(b, make([]byte, 1+pad)...)
	for _, s := range strs {
		b = append(b, s...)
		b = append(b, 0)
	}
	return b
}

func TestProcArgsEnvFindsTheMarker(t *testing.T) {
	const root = "/tmp/paperclip-fake-sandbox-1"
	marker := MarkerVar + "=" + root
	apple := []string{"executable_path=/bin/sleep", "ptr_munge=", "main_stack="}
	cases := []struct {
		name   string
		record []byte
		ok     bool
		want   string // markerIn of the environment
	}{
		{"marker among the environment", procargs(2, "/bin/sleep", 6, append([]string{"sleep", "999", "PATH=/usr/bin", marker, "TZ=UTC"}, apple...)...), true, root},
		{"no padding", procargs(1, "/bin/sh", 0, "sh", marker), true, root},
		{"first marker wins", procargs(1, "/bin/sh", 3, "sh", marker, MarkerVar+"=/elsewhere"), true, root},
		{"an argument that looks like the marker is an argument", procargs(2, "/usr/bin/env", 4, "env", marker, "PATH=/usr/bin"), true, ""},
		{"no environment", procargs(1, "/bin/true", 2, "true"), true, ""},
		{"cleared environment, apple strings only", procargs(1, "/bin/sh", 2, append([]string{"sh"}, apple...)...), true, ""},
		{"no arguments", procargs(0, "/bin/sh", 1, marker), true, root},
		{"fewer arguments than argc", procargs(3, "/bin/sh", 1, "sh", "-c"), false, ""},
		{"path not terminated", binary.NativeEndian.AppendUint32(nil, 1), false, ""},
		{"shorter than argc", []byte{1, 0}, false, ""},
		{"empty", nil, false, ""},
	}
	for _, tc := range cases {
		env, ok := procArgsEnv(tc.record)
		if ok != tc.ok {
			t.Errorf("%s: ok = %v, want %v", tc.name, ok, tc.ok)
		}
		if got := markerIn(env); got != tc.want {
			t.Errorf("%s: marker %q, want %q (env %q)", tc.name, got, tc.want, strings.ReplaceAll(string(env), "\x00", "|"))
		}
	}
}
