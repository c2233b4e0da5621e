// Package scale is `make bench-scale`: how the createos driver's requests to
// one CreateOS origin scale with concurrent leases, in two modes
// (BENCH_SCALE_MODE=lifecycle or hostload; both by default).
//
// Lifecycle: for each rate limit createos-sim can enforce (none, a
// 300-per-60-s window, a 5-per-second bucket) and for 1 and 4 leases at
// once, it starts a fresh createos-sim and a fresh worker, runs that many
// lease lifecycles (acquire, 20 executes, release) side by side through the
// worker's stdio, and reads the sim's request counters; it prints one table
// and fails when a lifecycle fails or a bound is missed.
//
// Host load: for each row (a bridge and a K: the file bridge at 8, 9 and
// 12, the duplex bridge at 16 and 32, the next host's file bridge, whose
// idle listing waits in the sandbox, at 8; BENCH_SCALE_BRIDGES and
// BENCH_SCALE_K choose others), K Paperclip runs on one account, through
// one worker, against a fresh sim at window:300/60s, each doing what
// ../shared/spec/host-load.md says the host does for a run (the queue
// poll and relays, or a duplex channel with PINGs and relayed responses;
// the run-log tail) for BENCH_SCALE_SECONDS; it prints one table per
// bridge, holds every row to the account's rules and the row at each
// bridge's checked K to every bound, and fails when one is missed.
//
// The measurement runs only when BENCH_SCALE_BIN names the directory
// holding sandbox-plugin and createos-sim; the tables, the bounds and the
// host's scripts are unit-tested always.
package scale
