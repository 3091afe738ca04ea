# backfill — the two commands that matter: `make run` and `make test`.

GO      ?= go
BIN     := bin/backfill
APT_PKGS := libzmq3-dev pkg-config
# Chromium, which only supervisors started with --render use (and the tests
# of rendering): `make deps-render`. The headless shell is what they start
# when it is there (a third less memory per render node, see BENCHMARKS.md);
# full Chromium is the fallback.
RENDER_PKGS := chromium chromium-headless-shell
# The validators `backfill provision check` runs, and the rehearsal's
# network namespaces and firewalls.
VALIDATOR_PKGS := cloud-init systemd shellcheck nftables openssh-server openssh-client \
	fail2ban python3-systemd python3-yaml iproute2 util-linux
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps deps-render deps-provision build run test test-short test-e2e rehearse bench fuzz clean

# deps installs, when missing, what building and the demo need: the C
# library the ZeroMQ bindings use and pkg-config. Nothing else: Chromium
# comes with deps-render, the provisioning validators with deps-provision.
deps:
	@missing=""; for p in $(APT_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v $(GO) >/dev/null || { echo "Go is required: https://go.dev/dl/"; exit 1; }

# deps-provision installs, when missing, the validators `backfill provision
# check` runs and the rehearsal's tools (make test and make rehearse use
# them). Packages that start a service on install (sshd, fail2ban) are kept
# from it by a policy-rc.d saying no, present only while they install.
deps-provision:
	@missing=""; for p in $(VALIDATOR_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		policy=/usr/sbin/policy-rc.d; made=""; \
		if [ ! -e $$policy ]; then printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee $$policy >/dev/null && $(SUDO) chmod 0755 $$policy && made=1; fi; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		status=$$?; [ -z "$$made" ] || $(SUDO) rm -f $$policy; exit $$status; \
	fi

# deps-render installs, when missing, Chromium for supervisors started with
# --render and the tests of rendering (make test uses it).
deps-render:
	@missing=""; for p in $(RENDER_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	$(GO) build -o $(BIN) ./cmd/backfill

# run builds backfill and runs the demo end to end on the embedded defaults.
run: build
	./$(BIN) demo

# test is what CI runs: vet, every package but the command's with the race
# detector, then the command's end-to-end tests (test-e2e) on their own.
# Those start whole crawls, processes and browsers: run beside the rest
# on two busy cores they took 461 s of a 12-minute budget, so they run
# after it, with a budget of their own.
E2E_PKG := ./cmd/backfill
test: deps deps-render deps-provision
	$(GO) vet ./...
	$(GO) test -race -timeout 12m $$($(GO) list ./... | grep -v '/cmd/backfill$$')
	$(MAKE) --no-print-directory test-e2e
	@echo "store backends the conformance suite ran against:"
	@$(GO) test -count=1 -run Conformance -v ./store 2>&1 | grep -E '^--- |^storetest:|BACKFILL_TEST_MONGO_URI' || true

# test-e2e runs the command's end-to-end tests (make test runs them too).
test-e2e: deps deps-render deps-provision
	$(GO) test -race -timeout 20m $(E2E_PKG)

# test-short is the inner loop: vet and every test that starts no
# whole crawl, process or browser (-short), without the race detector.
test-short: deps
	$(GO) vet ./...
	$(GO) test -short -timeout 5m ./...

# rehearse deploys a rendered cluster into network namespaces on this
# machine (root only) and crawls the sample dataset through it; make test
# runs it too.
rehearse: deps deps-render deps-provision
	$(GO) test -count=1 -run 'TestRehearsal' -v ./provisioning

bench: deps deps-render
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd bench && $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m .

# fuzz runs every fuzz target briefly (FUZZTIME each).
FUZZTIME ?= 20s
fuzz: deps
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf bin backfill-state
