# sandbox-plugin — run `make help` for the targets.
GO      ?= go
BIN     := bin/sandbox-plugin
VERSION ?= 0.1.0
LDFLAGS := -s -w -X main.version=$(VERSION)

.DEFAULT_GOAL := help

# Fragments owned by their areas (packaging, conformance, createos) add
# targets and append to EXTRA_TESTS, which `make test` runs after the Go tests.
EXTRA_TESTS :=
-include mk/*.mk
.PHONY: help build demo test test-go lint fmt-check bench update-golden fuzz

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sort | awk 'BEGIN{FS=":.*## "}{printf "  %-20s %s\n", $$1, $$2}'

build: ## build bin/sandbox-plugin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sandbox-plugin

demo: build ## pipe a fixture lifecycle into the fake driver and print every reply and notification
	@$(GO) run ./cmd/demo -bin $(BIN) testdata/demo.jsonl

test: setup test-go $(EXTRA_TESTS) ## set up what is missing (make setup), go test -race on everything, then the end-to-end suites

test-go: ## go test -race ./...
	$(GO) test -race -count=1 ./...

lint: ## go vet and staticcheck, with and without the synctrees tag (make test-sync-trees)
	$(GO) vet ./...
	$(GO) vet -tags synctrees ./bench/syncbench/
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags synctrees ./bench/syncbench/

fmt-check: ## fail when a Go file is not gofmt-ed
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench: ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

update-golden: ## rewrite the golden replies under testdata/
	$(GO) test ./e2e -run 'TestFixtures|TestHostileCorpus' -count=1 -update

FUZZTIME ?= 20s
FUZZ_TARGETS := handlers:FuzzParams sessions:FuzzSessionParams rpc:FuzzLineStream rpc:FuzzAppendJSONString rpc:FuzzEnvelope \
	internal/syncrule:FuzzExclude internal/safeopen:FuzzTreeResolve internal/procfs:FuzzParseStat internal/utf16:FuzzLen \
	internal/shquote:FuzzQuote internal/uri:FuzzComponent internal/envrule:FuzzValidName fake:FuzzSyncPathConfined fake:FuzzParseConfig \
	createos:FuzzSandboxName createos/config:FuzzParseConfig createos/filesync:FuzzCheckSandboxPath createos/archive:FuzzValidateArchive \
	createos/api:FuzzFrameReader createos/batch:FuzzDecoder createos/launch:FuzzData \
	createos/delta:FuzzDecode createos/delta:FuzzSplit

fuzz: ## run every fuzz target for FUZZTIME (default 20s) each
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; echo "== $$name ($$pkg)"; \
		$(GO) test ./$$pkg -list "^$$name\$$" | grep -qx "$$name" || { echo "no $$name in ./$$pkg: fix FUZZ_TARGETS"; exit 1; }; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s; \
	done
