# Packaging and the conformance suite: the installable Paperclip
# plugin package in out/package (+ a .tgz), and the Node suite that drives it
# through the real @paperclipai/server host code.

NODE           ?= node
NPM            ?= npm
PACKAGE_DIR    := out/package
PACKAGE_GOOS   ?= $(shell $(GO) env GOOS)
PACKAGE_GOARCH ?= $(shell $(GO) env GOARCH)
# Empty: every driver the binary knows. Otherwise a comma-separated list,
# used for the manifest and passed to the worker by the shim.
PACKAGE_DRIVERS ?=
CONFORMANCE_NPM_CACHE := $(abspath conformance/.npm-cache)

.PHONY: package conformance conformance-install

package: build ## assemble the Paperclip plugin package in out/package and pack out/*.tgz
	rm -rf $(PACKAGE_DIR) && mkdir -p $(PACKAGE_DIR)/bin
	CGO_ENABLED=0 GOOS=$(PACKAGE_GOOS) GOARCH=$(PACKAGE_GOARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
		-o $(PACKAGE_DIR)/bin/sandbox-plugin$(if $(filter windows,$(PACKAGE_GOOS)),.exe) ./cmd/sandbox-plugin
	$(NODE) package/scripts/build-package.mjs --out $(PACKAGE_DIR) --manifest-bin $(BIN) \
		--goos $(PACKAGE_GOOS) --goarch $(PACKAGE_GOARCH) --version $(VERSION) \
		$(if $(PACKAGE_DRIVERS),--drivers $(PACKAGE_DRIVERS))
	rm -f out/*.tgz
	$(NPM) pack ./$(PACKAGE_DIR) --pack-destination out --ignore-scripts --cache $(CONFORMANCE_NPM_CACHE) --loglevel warn

# npm ci only when the lockfile changed since the last install.
conformance/node_modules/.package-lock.json: conformance/package.json conformance/package-lock.json
	cd conformance && $(NPM) ci --cache $(CONFORMANCE_NPM_CACHE) --ignore-scripts --no-audit --no-fund --loglevel error

conformance-install: conformance/node_modules/.package-lock.json

# createos-sim (mk/createos-sim.mk) is the fake CreateOS the createos lifecycle
# runs against; test/createos.test.mjs starts and stops it. run-tests.mjs runs
# node --test, then removes the worker's sync store directories the run made
# (conformance/made-dirs.mjs).
conformance: package conformance-install createos-sim ## run the conformance suite: the packaged worker under the real Paperclip host code
	cd conformance && PLUGIN_PACKAGE_DIR=$(abspath $(PACKAGE_DIR)) CREATEOS_SIM_BIN=$(abspath $(CREATEOS_SIM)) \
		$(NODE) run-tests.mjs test/*.test.mjs

EXTRA_TESTS += conformance
