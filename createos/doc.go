// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", v0.3 with v0.1 lifecycle rules): a paced HTTP client for the
// CreateOS control plane, config parsing, the lease hooks, ordinary
// commands over one streaming exec (execute_stream.go; gated managed
// processes where an origin lacks it, process.go), the output follower
// with its exit recovery (follow.go), interactive setup and snapshot
// templates (setup.go), and the live sessions (duplex pipe channels and
// login PTYs, session*.go).
//
// Port decisions (spec/createos.md asks for them to be recorded):
//   - Output tails (4,194,304) and the frame limit (1,048,576) count UTF-16
//     code units, as JavaScript string lengths do; a tail is cut on a whole
//     rune, so it may keep one unit less than the reference.
//   - Per-command env is rendered in name order (Go maps have none).
//   - Every deadline this package sets has a timeout-typed cause that
//     matches context.DeadlineExceeded; cancellations never do. A deadline
//     gives a timed-out execute result, a cancellation an error. The
//     context is looked at once, when a command's steps are over
//     (outcome): a cancellation wins even over an exit frame already
//     read, so a cancelled call never reports success; an exit read past
//     the deadline is reported as the exit.
//   - Lease metadata records apiOriginSha256, the hex SHA-256 of the
//     normalised API origin, which ownership checks compare; the reference
//     stores the origin itself (apiUrl), but no configured URL or key may
//     reach metadata here. Metadata without the fingerprint is not ours:
//     resume reports it expired, other hooks refuse it.
//   - The pacer is shared by every Driver in the process (one worker).
//   - Every call answers within the host's own deadline for it
//     (deadlines.go): the call's work leaves its cleanup time, and cleanup
//     gets what is left of the budget, not a fresh timeoutMs as in the
//     reference, so an unanswered cleanup is reported unconfirmed while
//     the host still listens. A positive timeoutMs is at least 1 ms.
//   - A process-stream line past the frame limit is too large even when
//     it is blank (the reference limits any line).
//   - Sessions (v0.2 on the v0.1 lease rules): a lease acquired or resumed
//     here is cached for session opens, which carry no config; release,
//     destroy and shutdown forget it. A session's process whose creation
//     may have succeeded (5xx, no answer) or whose tree's end is
//     unconfirmed marks its lease leftover: commands go on, resume waits,
//     and a release that would pause the sandbox deletes it instead and
//     answers a destroyed receipt (the reference refuses the release and
//     leaves the sandbox running). Every other release and destroy still
//     answers null. A session's process already seen to exit is ended with
//     no request; a write after stop or close began is ignored and one
//     after the exit refused without a request; close goes on to stop
//     whatever stdin close answers. PTY bytes are delivered raw (the route
//     table decodes them).
//   - Requests are the latency (300 ms apart per origin): no request whose
//     answer is known in advance. A create, fork or resume answer that
//     shows the state needs no read; acquire writes the marker in its one
//     workspace command; resume replaces egress only when the row shows
//     another list; a reusable release keeps the sandbox warm with no
//     request; the catalog's default rootfs is cached 10 min per origin;
//     a lease fork reads its source only when the fork is refused.
//   - Managed processes (v0.3): a command (the fallback for origins
//     without streaming exec) waits at a start gate. Its requests are
//     sequential, in the order they reach a paced origin in the
//     reference: connect, then, once the connect has answered and before
//     its frames are read, stdin/close and the gate upload; so "ended
//     before its output stream connected" cannot happen (in the reference
//     neither). The gate's rm is sent when stdin was staged or the gate
//     may be left (no exit read); after an exit the script has removed it
//     (the reference sends the rm after every created process). Sessions
//     have no gate: their bodies are fixed (a duplex argv has no shell),
//     and they follow from seq 1. Commands and sessions recover an exit
//     through wait as the reference's followProcess does, which sessions
//     share: a stream that ended without an exit frame past the 3
//     reconnects asks wait (again at once on 408); its exit counts once
//     every frame up to newest_seq was read, else one more window of
//     reconnects opens after 1 s, and past it the output is incomplete.
//     Connect failures keep the reference's rule (past the reconnects the
//     connection failed, no wait), and a wait for a session runs until the
//     process exits or the session is stopped.
//   - A release keeps a sandbox warm only when the host can resume it: the
//     lease had an execution workspace and an agent (the host's reuse
//     scope, reuseScope in metadata); any other is deleted. Reusable
//     sandboxes are named by that scope, and an acquire in a scope deletes
//     the scope's paused sandboxes that this worker does not hold: the host
//     resumes before it acquires there, so those belong to leases it marked
//     failed and never resumes or destroys.
package createos
