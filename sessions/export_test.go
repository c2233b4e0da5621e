package sessions

// SetMaxClosed bounds how many closed routes t remembers.
func (t *Table) SetMaxClosed(n int) { t.maxClosed = n }

// SetDuplexLimits sets the duplex chunk and per-route total, and returns
// what restores them.
func SetDuplexLimits(chunk, total int) (restore func()) {
	saved := *duplexKind
	duplexKind.maxChunk, duplexKind.maxTotal = chunk, total
	return func() { *duplexKind = saved }
}

// DuplexOpened is duplexChannelOpen's result.
type DuplexOpened = duplexOpened
