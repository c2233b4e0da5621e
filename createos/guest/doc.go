// Package guest is the one program the createos driver runs inside a
// sandbox (guest.js, run by node) and the constants it shares with the Go
// side. Its subcommands run a batch of commands (createos/batch), reap
// what a dead batch left, and are the sandbox's side of the incremental
// sync (createos/delta): apply, index, recipe and pack.
//
// Program is guest.js after "use strict" and a JavaScript object GO that
// holds the constants below, so the program's numbers are the Go side's.
// One tree killer in it ends what a batch command started, on a timeout,
// a cancel, the batch's own end on a signal, and for reap. Each command of
// a batch runs under a small perl launcher (its text is in guest.js) that
// makes itself a child subreaper where perl can, so what a command
// orphans (setsid -f, a double fork, daemon(3)) stays in its tree: node
// cannot make itself one, and a mark in each command's environment would
// change what the command sees.
package guest
