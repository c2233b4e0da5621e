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
)
