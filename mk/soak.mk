# The createos fault soak (createos/soak_test.go, docs/reliability.md):
# SOAK_LIFECYCLES lease lifecycles through the JSON-RPC surface against
# createostest with random faults, SOAK_CONCURRENCY at a time, with the
# race detector. SOAK_SEED replays a run's faults (the seed is printed);
# with SOAK_CONCURRENCY=1 the replay is exact. Plain `go test` runs 60.
SOAK_LIFECYCLES  ?= 1000
SOAK_CONCURRENCY ?= 12
SOAK_SEED        ?=

.PHONY: soak

soak: ## the createos fault soak: 1000 lease lifecycles with random faults, -race (SOAK_LIFECYCLES, SOAK_CONCURRENCY, SOAK_SEED)
	SOAK_LIFECYCLES=$(SOAK_LIFECYCLES) SOAK_CONCURRENCY=$(SOAK_CONCURRENCY) SOAK_SEED=$(SOAK_SEED) \
		$(GO) test -race -count=1 -timeout 60m -run '^TestFaultSoak$$' -v ./createos/
