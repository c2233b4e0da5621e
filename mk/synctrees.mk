# test-sync-trees (bench/syncbench TestSyncTrees): the createos driver's
# incremental sync checked for correctness, not timed, on trees none of us
# wrote that every machine running the suite has: the Go toolchain's own
# $(go env GOROOT)/src and the node_modules of the real Paperclip server's
# install (make server-e2e's, out/server-e2e/npm, installed here when
# missing: the same pinned lockfile and stamp, so either target reuses the
# other's). Each tree is copied into a repository of the check's own
# (its files over SYNC_TREES_MAX_FILE_MIB left out: the agent CLIs' and
# Node's binaries, 1.0 GiB of node_modules' 1.74, make its check take
# about 18 minutes instead of 7.5 on 2 cores, and its content, with the
# clone's pack, outgrow the stores' 2 GiB bound) and goes through
# bench-sync's three runs (cold; one file changed; 100 more and a 20 MiB
# binary) on loopback, through the real worker in incremental mode
# against its own createos-sim. It fails when a tree is missing, a synced
# tree differs from the host's (SHA-256, both ways), the worker logs a
# fallback to the whole transfer, a warm run moves more than 2 % of the
# whole transfer's bytes either way (in: the host's tars; out: the files
# synced out; run 3: past the 20 MiB and the edits it wrote), or the
# worker's peak RSS reaches 64 MiB. Everything it writes is in one temp
# directory it removes. Under make test it runs after server-e2e.
#   SYNC_TREES=/some/dir:/other   other trees (default GOROOT/src and the server's node_modules)
#   SYNC_TREES_MAX_FILE_MIB=0     every file, however large (default 64)
#   BENCH_SYNC_SEED=2             other files edited (default 1)

SYNC_TREES_SERVER        = $(SERVER_E2E_CACHE)/npm
SYNC_TREES              ?= $(shell $(GO) env GOROOT)/src:$(abspath $(SYNC_TREES_SERVER))/node_modules
SYNC_TREES_MAX_FILE_MIB ?= 64
SYNC_TREES_TIMEOUT      ?= 60m

.PHONY: test-sync-trees

test-sync-trees: build createos-sim ## the incremental sync's correctness on real trees (GOROOT/src, the server's node_modules without its files over 64 MiB): three runs each through the real worker and createos-sim, trees identical, no fallback, warm runs at most 2 % of the whole transfer's bytes, RSS under 64 MiB
	BENCH_SYNC_BIN=$(abspath $(dir $(BIN))) BENCH_SYNC_TREES='$(SYNC_TREES)' BENCH_SYNC_MAX_FILE_MIB=$(SYNC_TREES_MAX_FILE_MIB) \
		BENCH_SYNC_SERVER_NPM=$(abspath $(SERVER_E2E_NPM)) BENCH_SYNC_SERVER_INSTALL=$(abspath $(SYNC_TREES_SERVER)) \
		$(GO) test -tags synctrees -count=1 -v -timeout $(SYNC_TREES_TIMEOUT) -run '^TestSyncTrees$$' ./bench/syncbench

# Under make test, after server-e2e (which installs the server first and
# shares the install), even with -j.
ifneq ($(filter test,$(MAKECMDGOALS)),)
test-sync-trees: | server-e2e
endif

EXTRA_TESTS += test-sync-trees
