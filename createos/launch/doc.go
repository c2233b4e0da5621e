// Package launch is the launcher a command runs as in a sandbox: one fixed bash program (Script)
// that reads the command's cwd, environment and argv, then its stdin, as data on its own stdin
// (Data, Decode), so no string of the command is folded into one argument that Linux's
// per-string limit would refuse (TooLong: the one string it would refuse to pass).
// createos/command sends it.
package launch
