package delta

import "github.com/paperclip-sandbox/sandbox-plugin/createos/guest"

// Exit statuses of the sandbox program's sync subcommands beside 0
// (createos/guest says what each means).
const (
	ExitStoreMiss = guest.ExitStoreMiss
	ExitBadInput  = guest.ExitBadInput
	ExitStoreBad  = guest.ExitStoreBad
)

// StoreEntries bounds the entries of the sandbox's store: an index lists
// at most that many hashes.
const StoreEntries = guest.StoreEntries
