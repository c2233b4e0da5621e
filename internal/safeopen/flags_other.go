//go:build !unix

package safeopen

// flags: systems without FIFOs open files without waiting; the handle is
// checked all the same.
func flags(_, _ bool) int { return 0 }
