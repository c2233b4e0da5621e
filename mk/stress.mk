# `make stress`: every package's tests, STRESS_COUNT times each with the
# race detector, while STRESS_LOAD busy loops (default: one a CPU) compete
# for the CPU. A flaky test is a defect; this is where it shows.
STRESS_COUNT ?= 20
STRESS_LOAD  ?= $(shell nproc)
STRESS_PKGS  ?= ./...

.PHONY: stress

stress: ## go test -race -count=20 of every package under CPU load (STRESS_PKGS, STRESS_COUNT, STRESS_LOAD)
	./mk/stress.sh $(STRESS_LOAD) $(GO) test -race -count=$(STRESS_COUNT) -timeout 90m $(STRESS_PKGS)
