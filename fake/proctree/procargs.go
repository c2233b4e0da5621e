package proctree

import (
	"bytes"
	"encoding/binary"
)

// procArgsEnv is the environment part of a kern.procargs2 record, which
// is how macOS shows a process's exec-time strings (proc_darwin.go): a
// 32-bit argc, the executable path and its NUL padding, argc
// NUL-terminated arguments, then NUL-terminated NAME=value strings — the
// environment, followed by the kernel's own "apple" strings
// (executable_path=…, ptr_munge=…), which never name MarkerVar. The
// arguments are skipped, so an argument that looks like the marker is
// not read as one; an empty argv[0] cannot be told from the padding, so
// one more string is skipped then. ok is false for a record too short to
// hold its arguments.
func procArgsEnv(b []byte) (env []byte, ok bool) {
	if len(b) < 4 {
		return nil, false
	}
	argc := int(binary.NativeEndian.Uint32(b))
	rest := b[4:]
	end := bytes.IndexByte(rest, 0)
	if end < 0 {
		return nil, false
	}
	rest = bytes.TrimLeft(rest[end:], "\x00")
	for ; argc > 0; argc-- {
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return nil, false
		}
		rest = rest[end+1:]
	}
	return rest, true
}
