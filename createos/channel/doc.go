// Package channel runs the CreateOS driver's live sessions: duplex pipe
// channels and login PTYs, each one managed process in a lease's sandbox
// whose output reaches the host's sessions.ChannelSink and whose input is
// the host's writes (sessions.Channel). The driver checks the lease and
// passes what a channel needs as an Env: the client, the sandbox, the
// bounds of its requests and a Lease that registers the channel and
// records a process that may still run. Live requests (output, writes) go
// through the client's Live view, a process's end through its Ending view.
package channel
