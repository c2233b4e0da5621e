# The createos driver's suite a second time with every command sent
# through the batch helper (createos/coalesce.go): what a command gets
# alone it must get in a batch. `make test-go` runs it in the default
# mode, where a command is batched only when others of its sandbox wait.

.PHONY: test-createos-coalesced

test-createos-coalesced: ## go test -race ./createos/ with SANDBOX_PLUGIN_CREATEOS_COALESCE=always
	SANDBOX_PLUGIN_CREATEOS_COALESCE=always $(GO) test -race -count=1 ./createos/

EXTRA_TESTS += test-createos-coalesced
