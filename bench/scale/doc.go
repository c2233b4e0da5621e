// Package scale is `make bench-scale`: how the createos driver's requests to
// one CreateOS origin scale with concurrent leases. For each rate limit
// createos-sim can enforce (none, a 300-per-60-s window, a 5-per-second
// bucket) and for 1 and 4 leases at once, it starts a fresh createos-sim and
// a fresh worker, runs that many lease lifecycles (acquire, 20 executes,
// release) side by side through the worker's stdio, and reads the sim's
// request counters; it prints one table and fails when a lifecycle fails or
// a budget is missed. The measurement runs only when BENCH_SCALE_BIN names
// the directory holding sandbox-plugin and createos-sim; the table and the
// budgets are unit-tested always.
package scale
