//go:build !unix

package createos

// nonblockingOpen is the open flags of openNonblocking. Where there are no
// unix fifos, an open for reading does not wait for a writer, and nothing
// extra is asked for.
func nonblockingOpen(_, _ bool) int { return 0 }
