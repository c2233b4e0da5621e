# Performance through the real host: bench/host.mjs drives
# the packaged worker (ours) through @paperclipai/server's
# createPluginWorkerHandle next to a Go floor worker that does the same real
# work with nothing else (bench/floor), our transport alone (bench/transport,
# health only) and the Node SDK peer, and prints every figure with its ratio
# to the floor and its budget; the JSON goes to BENCH_JSON. docs/performance.md
# says what bounds each figure; docs/results.md has the measured tables.
#   BENCH_ONLY=stream,sync     a few figures: health start true sleep stream sync createos
#   BENCH_SYNC_MB=64           a smaller sync tree for quick runs (default 1 GiB)
#   BENCH_SYNC_DIR=/dev/shm    where the sync trees and the lease roots go (default the temp dir)
#   BENCH_ARGS='--gap-ms 2'    any other bench/host.mjs option
# The pipe-client round trip is `go test -run '^$' -bench Pipe ./rpc`.
# bench-scale (bench/scale) runs K = 1 and 4 createos lease lifecycles at
# once against a fresh bin/createos-sim per sim rate limit, then the host
# load: K Paperclip runs on one CreateOS account through one worker against
# a sim at window:300/60s, one row per bridge and K, one table per bridge:
# the file bridge at K = 8, 9 and 12 (relay p95, and the K where a relay
# first takes over 10 s), the duplex bridge at 16 and 32, and the next
# host's file bridge (an idle listing waits ~5 s in the sandbox) at 8, with
# each listing's queue wait before the provider has it. Every row prints
# its 429s, the busiest 60 s (at most N = 270) and the steady rate as a
# share of N (at least 0.95 when saturated), and is held to those; the
# rows at file K=8, duplex K=16 and next K=8 also to every bound (relays
# within 10 s; PINGs and agent calls within 20 s, p95 under 5 s, no run-log
# tail given up; no listing sent after 4 s). It fails when a lifecycle
# fails or a rule is missed. The whole default run takes about 20 minutes
# on 2 cores (6 host-load rows of 125 s plus their set-up, about 17 of
# them; the lifecycles a few). The steady rate is counted from 65 s into
# the load, once what the account started at once has left its window.
#   BENCH_SCALE_MODE=hostload      one half: lifecycle or hostload (default both)
#   BENCH_SCALE_BRIDGES=next       the host-load bridges: file, duplex, next (default all three)
#   BENCH_SCALE_K=2,4              the same Ks for every bridge (default file 8,9,12; duplex 16,32; next 8)
#   BENCH_SCALE_SECONDS=30         steady host load per row (default 125)
#   BENCH_SCALE_RELAY_EVERY=5s     one relayed agent API call per run this often (default 10s)
# bench-sync (bench/syncbench) measures the createos driver's native sync as
# a heartbeat run uses it: a generated git repository, or a copy of any
# directory (REPO=<dir>: its regular files, symlinks as links and hard
# links as hard links, sockets, FIFOs and devices left out, committed into
# a repository of the bench's own), staged as the host's two tars
# (environmentSyncIn with its extract commands) and the workspace synced
# back out (environmentSyncOut), cold, after one edit, after 100 more and
# a 20 MiB binary (the edits: text files of the tree, in an order fixed by
# BENCH_SYNC_SEED), on one reused lease; today's whole transfer
# (SANDBOX_PLUGIN_CREATEOS_SYNC=whole) beside the incremental one (auto),
# each through its own worker and createos-sim, on loopback and through a
# throttled sim. It prints bytes, requests, wall times and the worker's
# peak RSS per run and direction, checks the sandbox's workspace against
# the host's tars and every synced-out tree against the host's, file by
# file, and fails when a target is missed (bench/syncbench/targets.go).
# Everything it writes (the tree, the tars, the sims' sandboxes, the
# workers' stores) is in one temp directory it removes.
# The variables are read from the environment (or the command line); they
# are not set here, so bench-host's BENCH_SYNC_MB default does not reach it.
#   REPO=$(go env GOROOT)/src                a directory instead of the generated repository
#   BENCH_SYNC_MB=30 BENCH_SYNC_FILES=2000   a quick look (default 300 MiB, 20000 files)
#   BENCH_SYNC_SEED=2                        another repository, or other files edited in REPO (default 1)
#   BENCH_SYNC_BANDWIDTH=up:10M,down:50M     the throttled link (default up:50M,down:200M; empty: loopback only)

BENCH_FLOOR     := bin/bench-floor
BENCH_TRANSPORT := bin/bench-transport
BENCH_N         ?= 2000
BENCH_RUNS      ?= 5
BENCH_SYNC_MB   ?= 1024
BENCH_SYNC_DIR  ?=
BENCH_ONLY      ?=
BENCH_JSON      ?= out/bench-host.json
BENCH_ARGS      ?=
BENCH_PROF      := out/prof
BENCH_SCALE_MODE        ?=
BENCH_SCALE_BRIDGES     ?=
BENCH_SCALE_K           ?=
BENCH_SCALE_SECONDS     ?=
BENCH_SCALE_RELAY_EVERY ?=
BENCH_SCALE_TIMEOUT     ?= 90m
BENCH_SYNC_TIMEOUT      ?= 90m

.PHONY: bench-host bench-workers bench-profile bench-scale bench-sync

bench-workers: ## build the benchmark workers into bin/bench-floor and bin/bench-transport
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BENCH_FLOOR) ./bench/floor
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BENCH_TRANSPORT) ./bench/transport

bench-host: build bench-workers package conformance-install createos-sim ## figures through the real host against a floor worker, median of 5 rounds (BENCH_ONLY=stream for one)
	$(NODE) bench/host.mjs --package $(abspath $(PACKAGE_DIR)) --modules $(abspath conformance/node_modules) \
		--floor $(abspath $(BENCH_FLOOR)) --transport $(abspath $(BENCH_TRANSPORT)) --sim $(abspath $(CREATEOS_SIM)) \
		--n $(BENCH_N) --runs $(BENCH_RUNS) --sync-mb $(BENCH_SYNC_MB) --json $(abspath $(BENCH_JSON)) \
		$(if $(BENCH_SYNC_DIR),--sync-dir $(abspath $(BENCH_SYNC_DIR))) $(if $(BENCH_ONLY),--figures $(BENCH_ONLY)) $(BENCH_ARGS)

BENCH_PROFILE ?= Stream64MiB

bench-profile: ## CPU and heap profiles of a 64 MiB execute (BENCH_PROFILE=Sleep64: 64 concurrent sleeps) through rpc and the fake driver (bench/execute_test.go) into out/prof, with their tops (the harness's own samples left out)
	@mkdir -p $(BENCH_PROF)
	$(GO) test -run '^$$' -bench '^Benchmark$(BENCH_PROFILE)$$' -benchmem -benchtime 10x -count 1 -o $(BENCH_PROF)/bench.test \
		-cpuprofile $(BENCH_PROF)/$(BENCH_PROFILE).cpu.pprof -memprofile $(BENCH_PROF)/$(BENCH_PROFILE).mem.pprof ./bench
	$(GO) tool pprof -top -nodecount 25 -ignore 'bench_test\.' $(BENCH_PROF)/bench.test $(BENCH_PROF)/$(BENCH_PROFILE).cpu.pprof
	$(GO) tool pprof -top -nodecount 15 -ignore 'bench_test\.' -sample_index=alloc_space $(BENCH_PROF)/bench.test $(BENCH_PROF)/$(BENCH_PROFILE).mem.pprof

bench-scale: build createos-sim ## K=1 and K=4 createos lease lifecycles against createos-sim under no limit, a 300/60s window and a 5/s bucket, then host-load runs on one account (file K=8,9,12, duplex K=16,32, next host K=8): the tables and the rules, about 20 min (BENCH_SCALE_MODE=hostload for one half, BENCH_SCALE_BRIDGES=next BENCH_SCALE_K=2 BENCH_SCALE_SECONDS=20 for a quick look)
	BENCH_SCALE_BIN=$(abspath $(dir $(BIN))) BENCH_SCALE_MODE=$(BENCH_SCALE_MODE) BENCH_SCALE_BRIDGES=$(BENCH_SCALE_BRIDGES) BENCH_SCALE_K=$(BENCH_SCALE_K) \
		BENCH_SCALE_SECONDS=$(BENCH_SCALE_SECONDS) BENCH_SCALE_RELAY_EVERY=$(BENCH_SCALE_RELAY_EVERY) \
		$(GO) test -count=1 -v -timeout $(BENCH_SCALE_TIMEOUT) -run '^$$' -bench '^BenchmarkScale$$' -benchtime=1x ./bench/scale

bench-sync: build createos-sim ## the createos driver's native sync as a heartbeat run uses it, today's whole transfer beside the incremental one, on loopback and through a 50M/200M link: a table per run and the targets, about 10 min at 300 MiB on 2 cores (BENCH_SYNC_MB=30 BENCH_SYNC_FILES=2000 for a quick look; REPO=<dir> for any directory instead of the generated repository)
	BENCH_SYNC_BIN=$(abspath $(dir $(BIN))) $(if $(REPO),BENCH_SYNC_REPO='$(abspath $(REPO))') \
		$(GO) test -count=1 -v -timeout $(BENCH_SYNC_TIMEOUT) -run '^$$' -bench '^BenchmarkSync$$' -benchtime=1x ./bench/syncbench
