// Package proctree is the fake driver's view of the process table: the
// marker a lease's commands carry (MarkerVar), who runs and to which lease
// each process is attributed, the worker as the subreaper and sole starter
// of its children (Children), and ending a set of processes or a process
// group for good (Terminate, TerminateGroup). Linux reads /proc, macOS sysctl.
package proctree
