# make chaos: through the real Paperclip server of make server-e2e, with
# the stub agent, on both drivers, each fault once — the worker SIGKILLed
# during an execute, a sync-in, a release and with a duplex bridge open;
# createos-sim unreachable and answering 500 for 10 s; two rate-limit
# storms met by four runs on a CreateOS account of their own; the server
# SIGTERMed mid-run and started again on its data directory — and a row
# per fault: the run's outcome, the next heartbeat, what was left. Each
# row is a scenario of e2e/server named chaos/<driver>/<fault>, after the
# shared set-up; RUN (a Go regexp: kill-execute, createos/kill-release,
# fake-plugin) selects rows, CHAOS_ONLY (comma-separated faults,
# driver/fault pairs or drivers) too. See docs/server-e2e/chaos.md.

RUN         ?=
CHAOS_ONLY  ?=
CHAOS_FLAGS ?=

.PHONY: chaos

chaos: release createos-sim ## crash-proof through the real server: each fault once on both drivers, a row per fault (logs in out/chaos)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(SERVER_E2E_RECORDER) ./e2e/server/recorder
	$(GO) run ./e2e/server -chaos -run '$(RUN)' -chaos-only '$(CHAOS_ONLY)' -out out/chaos -cache out/server-e2e -timeout 60m \
		-release $(RELEASE_DIR) -sim $(CREATEOS_SIM) -recorder $(SERVER_E2E_RECORDER) $(CHAOS_FLAGS)

# docs/server-e2e/chaos.md has what the whole table took here.
EXTRA_TESTS += chaos
