// Package batch runs several commands of one sandbox in one streaming
// exec: the sandbox program's batch subcommand (createos/guest) runs each
// command side by side as /bin/bash -lc with a launcher, under a child
// subreaper of its own where perl can make one, and frames their output
// and exits on its own stdout. This package holds the stdin that
// subcommand reads, the Decoder of what it writes, and the execs that run
// it, cancel one of its commands or reap a dead batch's leftovers;
// createos decides what to send.
package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
)

// Argv is the streaming exec's cmd and args that run the helper, the
// sandbox program's batch subcommand: "/usr/bin/env", ["node", "-e",
// guest.Program, "batch"]. No shell and no login profile: node gets
// exactly the environment the provider gives a command, which it passes
// on to each command's own login shell. A sandbox without node answers
// 127 and no hello.
func Argv() (cmd string, args []string) {
	return guest.Argv("batch")
}

// Command is one command of a batch.
type Command struct {
	Data      string // written to the command's stdin (the launcher's specification and stdin)
	TimeoutMs int64  // > 0: the helper ends the command's whole tree this long after the command's own start
}

// Batch is what one helper runs.
type Batch struct {
	Nonce  string // random per batch ([0-9a-f]{32}); starts each line the helper writes
	Dir    string // absolute path of the helper's control directory (created by the helper before hello, removed before bye)
	Launch string // the program each command runs as: /bin/bash -lc Launch
	Cmds   []Command
}

// header is the helper's first line of stdin.
type header struct {
	Nonce  string      `json:"n"`
	Dir    string      `json:"d"`
	Launch string      `json:"l"`
	Cmds   []cmdHeader `json:"c"`
}

type cmdHeader struct {
	Bytes     int   `json:"b"` // length of its data in bytes, as the helper counts them
	TimeoutMs int64 `json:"t"`
}

// Stdin is what the helper reads: a JSON header line, then each
// command's Data back to back. The exec carries stdin as a JSON
// string, so every value must be UTF-8 (a byte that is not would reach the
// helper changed and shift every later command's data; the helper then
// fails them all).
func Stdin(b Batch) (string, error) {
	if err := check(b); err != nil {
		return "", fmt.Errorf("createos batch: %w", err)
	}
	h := header{Nonce: b.Nonce, Dir: b.Dir, Launch: b.Launch, Cmds: make([]cmdHeader, len(b.Cmds))}
	size := 0
	for i, c := range b.Cmds {
		h.Cmds[i] = cmdHeader{Bytes: len(c.Data), TimeoutMs: c.TimeoutMs}
		size += len(c.Data)
	}
	line, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("createos batch: %w", err)
	}
	var s strings.Builder
	s.Grow(len(line) + 1 + size)
	s.Write(line)
	s.WriteByte('\n')
	for _, c := range b.Cmds {
		s.WriteString(c.Data)
	}
	return s.String(), nil
}

// Parse is Stdin's inverse, for providers that play the helper in tests:
// the batch stdin describes.
func Parse(stdin string) (Batch, error) {
	line, rest, ok := strings.Cut(stdin, "\n")
	if !ok {
		return Batch{}, errors.New("createos batch: no header line")
	}
	var h header
	if err := json.Unmarshal([]byte(line), &h); err != nil {
		return Batch{}, fmt.Errorf("createos batch: header: %w", err)
	}
	b := Batch{Nonce: h.Nonce, Dir: h.Dir, Launch: h.Launch, Cmds: make([]Command, len(h.Cmds))}
	for i, c := range h.Cmds {
		if c.Bytes < 0 || c.Bytes > len(rest) {
			return Batch{}, fmt.Errorf("createos batch: command %d: %d bytes of data, %d left", i, c.Bytes, len(rest))
		}
		b.Cmds[i] = Command{Data: rest[:c.Bytes], TimeoutMs: c.TimeoutMs}
		rest = rest[c.Bytes:]
	}
	if rest != "" {
		return Batch{}, fmt.Errorf("createos batch: %d bytes after the last command", len(rest))
	}
	if err := check(b); err != nil {
		return Batch{}, fmt.Errorf("createos batch: %w", err)
	}
	return b, nil
}

// check refuses a batch the helper would misread.
func check(b Batch) error {
	if !validNonce(b.Nonce) {
		return fmt.Errorf("nonce %q is not 32 lower-case hex digits", b.Nonce)
	}
	if !filepath.IsAbs(b.Dir) || filepath.Clean(b.Dir) != b.Dir || b.Dir == "/" || strings.ContainsAny(b.Dir, "\x00\n") || !utf8.ValidString(b.Dir) {
		return fmt.Errorf("control directory %q is not a clean absolute path", b.Dir)
	}
	if b.Launch == "" || strings.ContainsRune(b.Launch, 0) || !utf8.ValidString(b.Launch) {
		return fmt.Errorf("the launcher is empty, holds NUL or is not UTF-8")
	}
	for i, c := range b.Cmds {
		if !utf8.ValidString(c.Data) {
			return fmt.Errorf("command %d: its data is not UTF-8", i)
		}
		if c.TimeoutMs < 0 {
			return fmt.Errorf("command %d: timeout %d ms", i, c.TimeoutMs)
		}
	}
	return nil
}

func validNonce(n string) bool {
	if len(n) != 32 {
		return false
	}
	for _, r := range n {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// CancelArgv is the exec (cmd and args of a plain exec) that asks a
// running helper to end command i: it creates the file <dir>/<i>, which
// the helper looks for every 50 ms. It creates nothing once the helper has
// removed its directory (and then exits 1).
func CancelArgv(dir string, i int) (cmd string, args []string) {
	return "/bin/sh", []string{"-c", `[ -d "$1" ] && : > "$1/$2"`, "sh", dir, strconv.Itoa(i)}
}

// ReapArgv is the exec that ends what is left of commands whose helper
// died before answering them, the sandbox program's reap subcommand: every
// process whose session id or process group id is one of pids, and their
// descendants, stopped and then killed with SIGKILL until none is found
// (the same tree killer the helper ends a command with), then the control
// directory removed. It refuses, doing nothing (exit 2), a dir that is not
// a clean path under /tmp/ and a pid under 2; it exits 1 when processes
// outlive SIGKILL. Processes of its own session are never touched.
func ReapArgv(dir string, pids []int) (cmd string, args []string) {
	args = []string{dir}
	for _, p := range pids {
		args = append(args, strconv.Itoa(p))
	}
	return guest.Argv("reap", args...)
}
