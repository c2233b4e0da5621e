// Package syncbench is `make bench-sync`: the createos driver's native sync
// (environmentSyncIn, environmentSyncOut) as a Paperclip heartbeat run uses
// it on one reused lease, today's whole transfer (SANDBOX_PLUGIN_CREATEOS_SYNC=whole)
// beside the incremental one (auto), each through a worker and a createos-sim
// of its own, on loopback and through a throttled link.
//
// It generates a git repository (BENCH_SYNC_MB, BENCH_SYNC_FILES, from
// BENCH_SYNC_SEED), builds the host's two tars from it for each of three
// runs (cold; one file changed; 100 more changed and a 20 MiB binary added)
// as adapter-utils prepareSandboxManagedRuntime does, syncs them in with the
// host's post-upload commands, syncs the workspace out into an empty
// directory, checks the result byte for byte against the host's working
// tree, prints one table per run and holds the figures to the targets
// (targets.go).
//
// The measurement runs only when BENCH_SYNC_BIN names the directory holding
// sandbox-plugin and createos-sim (without it the benchmark fails); the
// generator, the host's tars, the exclude reading and the targets are
// unit-tested always.
package syncbench
