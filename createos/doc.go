// Package createos is the CreateOS sandbox-provider driver (driver key
// "createos", baseline v0.1): a paced HTTP client for the CreateOS control
// plane, config parsing, and the lease and managed-process execute hooks.
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
//     it is blank (spec §1.8: any line).
package createos
