//go:build !linux

package proc

import "errors"

// BecomeSubreaper fails: the harness runs on Linux only. Its leftover check
// needs a child subreaper, and createos-sim needs Linux namespaces.
func BecomeSubreaper() error {
	return errors.New("the server end-to-end harness runs on Linux only")
}
