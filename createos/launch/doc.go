// Package launch owns how a command reaches a sandbox: one fixed bash program (Script) that reads
// the command's cwd, environment and argv, then its stdin, as data on its own stdin, so no
// string of the command is folded into one argument that Linux's per-string limit would refuse.
package launch
