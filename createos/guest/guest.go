package guest

import (
	_ "embed"
	"encoding/json"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
)

//go:embed guest.js
var source string

// The constants the program shares with the Go side.
const (
	// Magic starts every sync stream (createos/delta).
	Magic = "PCSYNC1\n"
	// IndexMagic starts the list of the sandbox store's hashes that
	// index writes (createos/filesync reads it).
	IndexMagic = "PCINDEX\n"
	// MaxFrame bounds a sync stream frame's decoded bytes.
	MaxFrame = 1 << 20
	// MinContent is the smallest tar member data that is a content of its
	// own: shorter data is literal output.
	MinContent = 128
	// Level is the DEFLATE level sync frames are compressed at.
	Level = 5

	// ExitStoreMiss: a content named by reference is missing from the
	// sandbox's store or not what its name says (the entry is removed).
	ExitStoreMiss = 91
	// ExitBadInput: a stream or archive the program could not read, or
	// an unknown subcommand.
	ExitBadInput = 93
	// ExitStoreBad: the sandbox's store was not what it must be (a link,
	// an entry that is not a regular file of its own, a directory that is
	// not one) or its real path is inside the workspace. The program
	// removed the bad thing without following it and made the store
	// afresh where it may (never inside the workspace), wrote why on one
	// line of stderr and left no output: the mapping moves whole.
	ExitStoreBad = 95

	// StoreBytes bounds the bytes of the sandbox's store, as the worker's
	// store is bounded by default.
	StoreBytes = castore.DefaultMaxBytes
	// StoreEntries bounds the entries of the sandbox's store: an index
	// (32 bytes an entry) stays within 32 MiB.
	StoreEntries = 1 << 20
)

// lowWater is what an eviction brings a store past its bound down to: an
// eighth under the bound, as castore's store evicts.
func lowWater(bound int64) int64 { return bound - bound/8 }

// shared is the GO object of the program, by name.
var shared = map[string]any{
	"MAGIC":             Magic,
	"INDEX_MAGIC":       IndexMagic,
	"MAX_FRAME":         MaxFrame,
	"MIN_CONTENT":       MinContent,
	"LEVEL":             Level,
	"EXIT_STORE_MISS":   ExitStoreMiss,
	"EXIT_BAD_INPUT":    ExitBadInput,
	"EXIT_STORE_BAD":    ExitStoreBad,
	"STORE_BYTES":       StoreBytes,
	"STORE_ENTRIES":     StoreEntries,
	"STORE_LOW_BYTES":   lowWater(StoreBytes),
	"STORE_LOW_ENTRIES": lowWater(StoreEntries),
}

// Program is the program's text, run as node -e Program <subcommand>
// <args>.
var Program = func() string {
	obj, err := json.Marshal(shared) // keys sorted: the text is the same every run
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	b.WriteString("\"use strict\";\nconst GO = Object.freeze(")
	b.Write(obj)
	b.WriteString(");\n")
	b.WriteString(source)
	return b.String()
}()

// Argv is the exec (cmd and args) that runs subcommand with args:
// "/usr/bin/env", ["node", "-e", Program, subcommand, args...]. No shell
// and no login profile: node gets exactly the environment the provider
// gives a command.
func Argv(subcommand string, args ...string) (cmd string, argv []string) {
	return "/usr/bin/env", append([]string{"node", "-e", Program, subcommand}, args...)
}
