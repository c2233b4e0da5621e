package delta

import _ "embed"

// Helper is the sandbox's side (helper.js), run as node -e Helper with a
// command and its arguments.
//
//go:embed helper.js
var Helper string

// Exit statuses of the helper beside 0.
const (
	// ExitStoreMiss: a content named by reference is missing from the
	// sandbox's store or not what its name says (the entry is removed).
	ExitStoreMiss = 91
	// ExitBadInput: a stream or archive the helper could not read.
	ExitBadInput = 93
	// ExitStoreBad: the sandbox's store was not what it must be (a link,
	// an entry that is not a regular file of its own, a directory that is
	// not one) or its real path is inside the workspace. The helper
	// removed the bad thing without following it and made the store
	// afresh where it may (never inside the workspace), wrote why on one
	// line of stderr and left no output: the mapping moves whole.
	ExitStoreBad = 95
)

// StoreEntries bounds the entries of the sandbox's store (helper.js
// STORE_ENTRIES): an index lists at most that many hashes.
const StoreEntries = 1 << 20
