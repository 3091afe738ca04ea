# backfill — the two commands that matter: `make run` and `make test`.

GO      ?= go
BIN     := bin/backfill
APT_PKGS := libzmq3-dev pkg-config chromium
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build run test bench fuzz clean

# deps installs, when missing, the C library the ZeroMQ bindings need and
# Chromium for JavaScript rendering (render nodes and their tests).
deps:
	@missing=""; for p in $(APT_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v $(GO) >/dev/null || { echo "Go is required: https://go.dev/dl/"; exit 1; }

build: deps
	$(GO) build -o $(BIN) ./cmd/backfill

# run builds backfill and runs the demo end to end on the embedded defaults.
run: build
	./$(BIN) demo

test: deps
	$(GO) vet ./...
	$(GO) test -race -timeout 12m ./...
	@echo "store backends the conformance suite ran against:"
	@$(GO) test -count=1 -run Conformance -v ./store 2>&1 | grep -E '^--- |^storetest:|BACKFILL_TEST_MONGO_URI' || true

bench: deps
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
