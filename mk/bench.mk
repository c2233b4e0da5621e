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
# load: K Paperclip runs (file bridge, then duplex bridge) on one CreateOS
# account through one worker against a sim at window:300/60s, one table per
# bridge; it fails when a lifecycle fails or a budget is missed (the
# lifecycle's in docs/performance.md; the host load's, at K=4 only, in
# bench/scale).
#   BENCH_SCALE_MODE=hostload   one half: lifecycle or hostload (default both)
#   BENCH_SCALE_K=2,4           the host-load Ks (default 2,4,6,8)
#   BENCH_SCALE_SECONDS=30      steady host load per row (default 90)
#   BENCH_SCALE_RELAY_EVERY=5s  one relayed agent API call per run this often (default 10s)

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
BENCH_SCALE_K           ?=
BENCH_SCALE_SECONDS     ?=
BENCH_SCALE_RELAY_EVERY ?=
BENCH_SCALE_TIMEOUT     ?= 90m

.PHONY: bench-host bench-workers bench-profile bench-scale

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

bench-scale: build createos-sim ## K=1 and K=4 createos lease lifecycles against createos-sim under no limit, a 300/60s window and a 5/s bucket, then K host-load runs per bridge on one account: the tables and the budgets (BENCH_SCALE_MODE=hostload for one half)
	BENCH_SCALE_BIN=$(abspath $(dir $(BIN))) BENCH_SCALE_MODE=$(BENCH_SCALE_MODE) BENCH_SCALE_K=$(BENCH_SCALE_K) \
		BENCH_SCALE_SECONDS=$(BENCH_SCALE_SECONDS) BENCH_SCALE_RELAY_EVERY=$(BENCH_SCALE_RELAY_EVERY) \
		$(GO) test -count=1 -v -timeout $(BENCH_SCALE_TIMEOUT) -run '^$$' -bench '^BenchmarkScale$$' -benchtime=1x ./bench/scale
