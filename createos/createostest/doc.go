// Package createostest is an in-process fake CreateOS control plane for
// tests: NewServer serves the /v1 API (sandboxes, files, /exec and managed
// processes, backed by real directories and real commands in a private
// mount and PID namespace, which needs root or CAP_SYS_ADMIN on Linux),
// with fault knobs, a request log that counts body bytes, and an uplink
// and downlink rate for file transfers (Options.UpBitsPerSecond,
// package bandwidth); cmd/createos-sim serves the same server on a TCP
// port.
package createostest
