// Package syncbench is `make bench-sync` and `make test-sync-trees`: the
// createos driver's native sync (environmentSyncIn, environmentSyncOut) as
// a Paperclip heartbeat run uses it on one reused lease, today's whole
// transfer (SANDBOX_PLUGIN_CREATEOS_SYNC=whole) beside the incremental one
// (auto), each through a worker and a createos-sim of its own.
//
// The repository is generated (BENCH_SYNC_MB, BENCH_SYNC_FILES, from
// BENCH_SYNC_SEED) or a copy of any directory (BENCH_SYNC_REPO, copyTree)
// committed afresh. For each of three runs (cold; one file changed; 100
// more changed and a 20 MiB binary added) the bench builds the host's two
// tars from it as adapter-utils prepareSandboxManagedRuntime does, syncs
// them in with the host's post-upload commands, checks the sandbox's
// workspace against the tars, syncs the workspace out into an empty
// directory and checks it against the host's working tree (SHA-256, file
// by file). BenchmarkSync does it on loopback and through a throttled link
// and holds the figures to the targets (targets.go); TestSyncTrees does it
// on loopback for each of BENCH_SYNC_TREES and holds the runs to the
// correctness rules (checks.go). Everything either writes is in one
// scratch directory its cleanup removes (benchproc.Scratch).
//
// Both run only with BENCH_SYNC_BIN naming the directory holding
// sandbox-plugin and createos-sim; the generator, the copy, the edit
// picker, the host's tars, the exclude reading, the targets and the
// checks are unit-tested always.
package syncbench
