//go:build !linux

package main

import "errors"

// becomeSubreaper fails: the harness runs on Linux only. Its leftover check
// needs a child subreaper, and createos-sim needs Linux namespaces.
func becomeSubreaper() error {
	return errors.New("the server end-to-end harness runs on Linux only")
}
