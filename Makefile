# airlock — `make help` lists the targets.

.DEFAULT_GOAL := help
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

# The official Go tarball lives in /usr/local/go; prefer it over a distribution's older go.
# Always on PATH, so `make deps run` finds the Go that deps has just installed.
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go

# Real-sandbox tests skip loudly where the kernel lacks a feature; AIRLOCK_REQUIRE_SANDBOX=1
# (set by .ci/run) turns each such skip into a failure.
export AIRLOCK_REQUIRE_SANDBOX

UNAME := $(shell uname -s)
# libseccomp-golang needs cgo on Linux; darwin builds are pure Go. On Linux the binary is
# linked statically (libseccomp.a comes with libseccomp-dev): it then runs anywhere, and
# every sandbox's init, which is this binary re-executed, starts ~0.5 ms faster without
# the dynamic loader. netgo and osusergo keep glibc's NSS out of the static link.
ifeq ($(UNAME),Linux)
BUILD_ENV   := CGO_ENABLED=1
BUILD_FLAGS := -tags netgo,osusergo
STATIC_LD   := -linkmode external -extldflags "-static"
endif

GO_MIN       := 1.26
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit is stamped by hand too: Go's own VCS stamping is off wherever GOFLAGS has
# -buildvcs=false (as on the shared build hosts), and `airlock version` must still say it.
COMMIT       ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS      := -X github.com/airlock-mcp/airlock/cli.Version=$(VERSION) -X github.com/airlock-mcp/airlock/cli.Commit=$(COMMIT) $(STATIC_LD)
TOOLS        := $(CURDIR)/.tools/bin
GOLANGCI_VERSION := v2.15.0
GOLANGCI     := $(TOOLS)/golangci-lint
# clang-format formats the init's C (.clang-format); Debian 12's clang-format package is
# version 14, which CI installs.
CLANG_FORMAT ?= $(shell command -v clang-format-14 || command -v clang-format || echo clang-format)
C_FILES      = $(shell git ls-files -co --exclude-standard '*.c' '*.h')
FUZZTIME     ?= 10s
BENCHTIME    ?= 1s
TEST_TIMEOUT ?= 30m
SOAK_CALLS   ?= 2000
SOAK_PARALLEL ?= 8
SUDO         := $(if $(filter 0,$(shell id -u)),,sudo)

PREFIX       ?= /usr/local
APPARMOR_DIR ?= /etc/apparmor.d

.PHONY: help build build-linux-arm64 install run test test-go test-darwin-compile fmt-check bench bench-cli soak lint vet fmt \
        update-golden fuzz-short c-fmt-check deps clients fleet-test k8s-check kube-play

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/airlock (cgo on Linux, for libseccomp)
	$(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -trimpath -ldflags '$(LDFLAGS)' -o bin/airlock .

# Debian/Ubuntu cross toolchain: gcc-aarch64-linux-gnu, libc6-dev:arm64 and libseccomp-dev:arm64 (after
# dpkg --add-architecture arm64); .ci/run's arm64 step installs them.
build-linux-arm64: ## cross-build bin/airlock-linux-arm64 (static, cgo) on an x86_64 Debian/Ubuntu
	CC=aarch64-linux-gnu-gcc GOOS=linux GOARCH=arm64 CGO_ENABLED=1 PKG_CONFIG_PATH=/usr/lib/aarch64-linux-gnu/pkgconfig \
	  $(GO) build -tags netgo,osusergo -trimpath -ldflags '-X github.com/airlock-mcp/airlock/cli.Version=$(VERSION) -linkmode external -extldflags "-static"' -o bin/airlock-linux-arm64 .

# Ubuntu 23.10+ lets a program create user namespaces only under an AppArmor profile that
# grants them, and the profile attaches by path: it is installed for the path installed to.
install: ## install bin/airlock to PREFIX/bin (/usr/local/bin) and, where AppArmor restricts user namespaces, its profile
	@[ -x bin/airlock ] || { echo "bin/airlock is not built: run make build first (as your user)"; exit 1; }
	$(SUDO) install -D -m 0755 bin/airlock $(DESTDIR)$(PREFIX)/bin/airlock
	@if [ "$$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null)" = 1 ]; then \
	  echo "AppArmor restricts user namespaces here: installing $(APPARMOR_DIR)/airlock for $(PREFIX)/bin/airlock"; \
	  sed 's|/usr/local/bin/airlock|$(PREFIX)/bin/airlock|' examples/apparmor/airlock | $(SUDO) tee $(APPARMOR_DIR)/airlock >/dev/null; \
	  $(SUDO) apparmor_parser -r $(APPARMOR_DIR)/airlock; \
	fi
	@echo "installed $(PREFIX)/bin/airlock; check it: $(PREFIX)/bin/airlock probe"

# stdout is the MCP channel here, so the build's own output goes to stderr and make echoes
# nothing.
run: ## build, then serve MCP over stdio with the embedded defaults
	@$(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -trimpath -ldflags '$(LDFLAGS)' -o bin/airlock . >&2
	@exec ./bin/airlock serve

test: vet fmt-check test-go test-darwin-compile fuzz-short ## the whole suite: vet, gofmt, race tests (the sandbox suite again as nobody: TestUnprivileged), darwin compile, short fuzz
	@echo "make test: all passed"

test-go: ## go test -race over every package
	$(BUILD_ENV) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-darwin-compile: ## compile the darwin backend's tests (they run only on a Mac)
	GOOS=darwin CGO_ENABLED=0 $(GO) test -c -o /dev/null ./sandbox/darwin/

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The linux packages need cgo (libseccomp), which a Mac cannot cross-compile: there they
# are vetted by the Linux jobs.
vet: ## go vet for linux (on Linux) and darwin, and the windows build
ifeq ($(UNAME),Linux)
	$(BUILD_ENV) GOOS=linux $(GO) vet ./...
endif
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...
	GOOS=windows CGO_ENABLED=0 $(GO) build ./...

fmt: ## gofmt every Go file and clang-format every C file in place
	gofmt -w $$(git ls-files -co --exclude-standard '*.go')
	"$(CLANG_FORMAT)" -i --style=file $(C_FILES)

c-fmt-check: ## fail if clang-format would change a C file (make fmt fixes it)
	@command -v "$(CLANG_FORMAT)" >/dev/null || { echo "clang-format is missing: apt-get install clang-format"; exit 1; }
	@"$(CLANG_FORMAT)" --version | grep -q 'version 14\.' || echo "note: .clang-format is written for clang-format 14, this is $$("$(CLANG_FORMAT)" --version)"
	@"$(CLANG_FORMAT)" --dry-run --Werror --style=file $(C_FILES) || { echo "clang-format would change the files above: run make fmt"; exit 1; }

fuzz-short: ## fuzz every Fuzz target for FUZZTIME (10s) each
	scripts/fuzz-short.sh $(FUZZTIME)

update-golden: ## rewrite the golden snapshots (tool schemas, SBPL profiles)
	$(GO) test -count=1 ./tools -update
	$(GO) test -count=1 ./sandbox/darwin -update

# COMPARE=path/to/another/airlock adds that build's windows to the same interleaved rounds.
bench: build ## airlock vs the bare interpreter and bwrap over MCP stdio, interleaved (COMPARE=BIN: another build too), plus the Go micro-benchmarks
	$(GO) run ./cmd/airlock-bench -airlock bin/airlock $(if $(COMPARE),-compare $(COMPARE))
	$(BUILD_ENV) $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

bench-cli: build ## goal 4 alone: airlock run FILE vs bare python, interleaved round by round (COMPARE=BIN: that build's airlock run in the same rounds)
	$(GO) run ./cmd/airlock-bench -cli-only -airlock bin/airlock $(if $(COMPARE),-compare $(COMPARE))

clients: build ## the official MCP Go and TypeScript SDKs drive bin/airlock over stdio, Streamable HTTP and SSE (needs the Go proxy and npm)
	cd clients/go && $(GO) vet ./... && AIRLOCK_BIN=$(CURDIR)/bin/airlock $(GO) test -count=1 ./...
	clients/ts/run.sh bin/airlock

soak: build ## many parallel calls through one server: leaks, hangs, ordering
	$(GO) run ./cmd/airlock-soak -airlock bin/airlock -calls $(SOAK_CALLS) -parallel $(SOAK_PARALLEL)

FLEET_CALLS ?= 2000
FLEET_CLIENTS ?= 16

fleet-test: build ## 3 replicas behind HAProxy on loopback, a rolling restart and a SIGKILL under load; every call answered, none run twice
	$(GO) run ./cmd/airlock-fleet -airlock bin/airlock -calls $(FLEET_CALLS) -clients $(FLEET_CLIENTS)

k8s-check: ## decode deploy/kubernetes/*.yaml strictly into the Kubernetes API types (its own module)
	cd deploy/kubernetes/check && $(GO) run . ../*.yaml

kube-play: build ## build the runtime image and run deploy/kubernetes with podman kube play (root)
	scripts/kube-play-test.sh bin/airlock

lint: c-fmt-check ## golangci-lint (pinned) for linux and darwin, and clang-format for the C
	@if ! "$(GOLANGCI)" version 2>/dev/null | grep -q "version $(GOLANGCI_VERSION:v%=%) "; then \
	  echo "installing golangci-lint $(GOLANGCI_VERSION) into $(TOOLS)"; \
	  GOBIN="$(TOOLS)" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION); \
	fi
	$(BUILD_ENV) GOOS=linux "$(GOLANGCI)" run --allow-parallel-runners ./...
	GOOS=darwin CGO_ENABLED=0 "$(GOLANGCI)" run --allow-parallel-runners ./...

# The test suite's own needs come with it (make test must pass after make deps): Debian's
# numpy, pandas, matplotlib and venv for the environment tests, pip for the egress tests,
# uidmap (newuidmap) for the subordinate-id tests.
TEST_PACKAGES := python3-numpy python3-pandas python3-matplotlib python3-venv python3-pip uidmap

deps: ## install what a fresh Debian/Ubuntu needs to build and test (gcc, libseccomp-dev, pkg-config, python3 and the tests' packages) and check Go
	@missing=""; \
	for p in gcc libc6-dev pkg-config libseccomp-dev python3 git curl ca-certificates $(TEST_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing" >&2; \
	  $(SUDO) apt-get -o DPkg::Lock::Timeout=900 update -qq >&2; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends $$missing >&2; \
	else echo "system packages: all present" >&2; fi
	@v=$$($(GO) env GOVERSION 2>/dev/null | sed "s/^go//" || true); \
	if [ -z "$$v" ] || [ "$$(printf '%s\n%s\n' "$(GO_MIN)" "$$v" | sort -V | head -n1)" != "$(GO_MIN)" ]; then \
	  echo "Go $(GO_MIN) or newer is needed (found: $${v:-none}; Debian/Ubuntu's golang-go is older):" >&2; \
	  echo "installing the official go1.26.8 release into /usr/local/go" >&2; \
	  tgz=$$(mktemp) && \
	  curl -fsSL "https://go.dev/dl/go1.26.8.linux-$$(dpkg --print-architecture).tar.gz" -o "$$tgz" && \
	  $(SUDO) rm -rf /usr/local/go && $(SUDO) tar -C /usr/local -xzf "$$tgz" && rm -f "$$tgz" && \
	  v=$$(/usr/local/go/bin/go env GOVERSION | sed "s/^go//") || { echo "installing Go failed" >&2; exit 1; }; \
	fi; echo "go $$v: ok" >&2
