# Release packages: the plugin the way Go tools ship on npm. One
# main package, paperclip-plugin-go-sandbox (manifest, the Node shim, no
# install scripts), with an optional dependency on one package per
# platform, paperclip-go-sandbox-<platform>-<arch>, each holding only its
# cross-compiled worker and declaring its os/cpu, so that npm installs the
# one that matches the host. All at one VERSION, packed into out/release.
# `make package` (mk/package.mk) stays the single-platform build.

RELEASE_DIR       := out/release
RELEASE_STAGE     := $(RELEASE_DIR)/stage
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_DRIVERS   := $(if $(PACKAGE_DRIVERS),--drivers $(PACKAGE_DRIVERS))

.PHONY: release cross-check package-test

release: build ## cross-compile the worker for RELEASE_PLATFORMS and pack the main and platform packages into out/release
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_STAGE)
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		goos=$${p%/*}; goarch=$${p#*/}; dir=$(RELEASE_STAGE)/$$goos-$$goarch; \
		mkdir -p $$dir/bin; \
		echo "CGO_ENABLED=0 GOOS=$$goos GOARCH=$$goarch $(GO) build -o $$dir/bin/sandbox-plugin ./cmd/sandbox-plugin"; \
		CGO_ENABLED=0 GOOS=$$goos GOARCH=$$goarch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$dir/bin/sandbox-plugin ./cmd/sandbox-plugin; \
		$(NODE) package/scripts/build-package.mjs --kind platform --out $$dir --goos $$goos --goarch $$goarch --version $(VERSION) $(RELEASE_DRIVERS); \
	done
	$(NODE) package/scripts/build-package.mjs --kind main --out $(RELEASE_STAGE)/main --manifest-bin $(BIN) \
		--version $(VERSION) --platforms '$(RELEASE_PLATFORMS)' $(RELEASE_DRIVERS)
	@set -e; for d in $(RELEASE_STAGE)/*/; do \
		$(NPM) pack ./$$d --pack-destination $(RELEASE_DIR) --ignore-scripts --cache $(CONFORMANCE_NPM_CACHE) --loglevel warn >/dev/null; \
	done
	@cd $(RELEASE_DIR) && for f in *.tgz; do printf '  %-48s %9d bytes\n' $$f $$(wc -c < $$f); done

cross-check: ## go vet and go build for every release platform; the fake's tests (fake, fake/synccopy) compiled (not run) for darwin
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		goos=$${p%/*}; goarch=$${p#*/}; echo "== $$p: go vet ./..., go build ./..."; \
		GOOS=$$goos GOARCH=$$goarch $(GO) vet ./...; \
		CGO_ENABLED=0 GOOS=$$goos GOARCH=$$goarch $(GO) build ./...; \
	done
	@set -e; for a in amd64 arm64; do \
		for pkg in ./fake/ ./fake/synccopy/; do \
			echo "== darwin/$$a: go test -c $$pkg"; \
			GOOS=darwin GOARCH=$$a $(GO) test -c -o /dev/null $$pkg; \
		done; \
	done

package-test: ## the shim's platform resolution (node --test package/test/)
	$(NODE) --test package/test/

EXTRA_TESTS += package-test

# The conformance suite checks the release tarballs too (each one's
# layout, the main package through the host's loader and validator, the
# worker started through its platform package).
conformance: release
conformance: export PLUGIN_RELEASE_DIR = $(abspath $(RELEASE_DIR))
