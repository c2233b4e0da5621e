# Transport benchmark through the real host (issue 9): health round trips
# via @paperclipai/server's createPluginWorkerHandle for the packaged worker
# (ours), a minimal Go worker answering inline (bench/floor), our transport
# alone (bench/transport: rpc.Server with a fixed health answer) and the
# Node SDK peer; median of BENCH_RUNS runs of BENCH_N calls each, and the
# ratios to the floor. BENCH_ARGS adds options (e.g. --gap-ms 2).
# The pipe-client round trip is `go test -run '^$' -bench Pipe ./rpc`.

BENCH_FLOOR     := bin/bench-floor
BENCH_TRANSPORT := bin/bench-transport
BENCH_N         ?= 2000
BENCH_RUNS      ?= 5
BENCH_ARGS      ?=

.PHONY: bench-host bench-workers

bench-workers: ## build the benchmark workers into bin/bench-floor and bin/bench-transport
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BENCH_FLOOR) ./bench/floor
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BENCH_TRANSPORT) ./bench/transport

bench-host: build bench-workers package conformance-install ## health round trips through the real host: ours/floor ratio, median of 5 runs
	$(NODE) bench/host.mjs --package $(abspath $(PACKAGE_DIR)) --modules $(abspath conformance/node_modules) \
		--floor $(abspath $(BENCH_FLOOR)) --transport $(abspath $(BENCH_TRANSPORT)) \
		--n $(BENCH_N) --runs $(BENCH_RUNS) $(BENCH_ARGS)
