# make setup: what make test needs from outside the repository, installed
# before any long step (make test runs it first): Debian's nodejs, npm and
# chromium when missing (mk/setup.sh: as root, else it stops and prints the
# command), then the conformance suite's pinned npm packages. The server's
# own install (Node 24 and paperclipai from the npm registry) is make
# server-e2e's first step.

# CHROMIUM is the Chromium make server-e2e's browser flow drives.
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup check

setup: ## install what make test needs and lacks (Debian's nodejs, npm, chromium as root; the pinned npm packages)
	@sh mk/setup.sh $(CHROMIUM)
	@$(MAKE) --no-print-directory conformance-install

check: fmt-check lint test-go ## the loop before a commit: gofmt, go vet, staticcheck and go test -race (a few minutes)
