# The createos driver's suite a second time with every command sent
# through the batch helper (createos/command/coalesce.go): what a command gets
# alone it must get in a batch. `make test-go` runs it in the default
# mode, where a command is batched only when others of its sandbox wait.

.PHONY: test-createos-coalesced

test-createos-coalesced: ## go test -race ./createos/ with SANDBOX_PLUGIN_CREATEOS_COALESCE=always
	SANDBOX_PLUGIN_CREATEOS_COALESCE=always $(GO) test -race -count=1 ./createos/

EXTRA_TESTS += test-createos-coalesced

# The driver's sync tests a second time with every mapping moved whole
# (SANDBOX_PLUGIN_CREATEOS_SYNC=whole): the incremental sync (createos/delta)
# is an optimization, and what a sync gives must not depend on it. `make
# test-go` runs them incremental, the default.

.PHONY: test-createos-whole-sync

test-createos-whole-sync: ## go test -race the createos sync tests with SANDBOX_PLUGIN_CREATEOS_SYNC=whole
	SANDBOX_PLUGIN_CREATEOS_SYNC=whole $(GO) test -race -count=1 -run 'Sync' ./createos/

EXTRA_TESTS += test-createos-whole-sync
