# The fake CreateOS control plane (createos/createostest) as a standalone
# server for manual use and end-to-end suites. Commands run in private
# mount/PID namespaces, so running it needs root (or CAP_SYS_ADMIN) on Linux.

CREATEOS_SIM     := bin/createos-sim
CREATEOS_SIM_KEY ?= test-key

.PHONY: createos-sim createos-sim-run test-createos-sim

createos-sim: ## build bin/createos-sim (fake CreateOS server)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(CREATEOS_SIM) ./cmd/createos-sim

createos-sim-run: createos-sim ## run the fake CreateOS server on a free port (prints its URL; Ctrl-C stops)
	$(CREATEOS_SIM) --listen 127.0.0.1:0 --api-key $(CREATEOS_SIM_KEY) --control -v

test-createos-sim: ## go test -race the fake CreateOS server and its command
	$(GO) test -race -count=1 ./createos/createostest/... ./cmd/createos-sim/
