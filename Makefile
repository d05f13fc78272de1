# The whole test suite: what the tests need (installed when missing),
# formatting, vet, the race-enabled tests, the deployment files' tests
# (tools/, its own module, with the pinned helm) and the image's smoke
# test where a Docker engine is (it says plainly when it did not run). CI
# runs exactly `make test` (see .ci/run).

GO ?= go

.PHONY: test vet fmt-check build fuzz deps deps-bwrap deps-chromium deps-npm deps-esbuild pi-extension

test: deps vet
	$(GO) test -race -count=1 ./...
	cd tools && $(GO) vet ./... && $(GO) test -count=1 ./...
	@bash deploy/image-smoke.sh

# deps installs what the tests use for real and the machine lacks:
# bubblewrap, the default sandbox, and Chromium, the admin page's browser
# tests' (Debian's packages, as root), the two agent CLIs and axe-core
# (the page's accessibility scan) at their pinned versions into .tools/npm,
# and esbuild, which bundles the pi extension, into .tools/esbuild (all
# git-ignored).
NPM_PREFIX := .tools/npm
PI_PKG := @mariozechner/pi-coding-agent@0.73.1
CLAUDE_PKG := @anthropic-ai/claude-code@2.1.332
AXE_PKG := axe-core@4.14.1

deps: deps-bwrap deps-chromium deps-npm deps-esbuild

deps-bwrap:
	@if ! command -v bwrap >/dev/null 2>&1; then \
		if [ "$$(id -u)" != 0 ]; then echo "bubblewrap is missing: run sudo apt-get install -y bubblewrap"; exit 1; fi; \
		echo "installing bubblewrap (apt-get install -y bubblewrap)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	fi

# Debian's Chromium, which the browser tests drive headless (chromedp).
deps-chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" != 0 ]; then echo "Chromium is missing: run sudo apt-get install -y chromium"; exit 1; fi; \
		echo "installing Chromium (apt-get install -y chromium)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# The stamp names every version: changing a pin reinstalls.
deps-npm: $(NPM_PREFIX)/.installed-0.73.1-2.1.332-axe4.14.1

$(NPM_PREFIX)/.installed-0.73.1-2.1.332-axe4.14.1:
	@command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Node.js 20 (apt-get install -y nodejs npm)"; exit 1; }
	@echo "installing $(PI_PKG), $(CLAUDE_PKG) and $(AXE_PKG) into $(NPM_PREFIX)"
	@mkdir -p $(NPM_PREFIX)
	npm install --prefix $(NPM_PREFIX) --no-audit --no-fund --loglevel=error $(PI_PKG) $(CLAUDE_PKG) $(AXE_PKG)
	@touch $@

ESBUILD_PKG := esbuild@0.28.2

deps-esbuild: .tools/esbuild/.installed-0.28.2

.tools/esbuild/.installed-0.28.2:
	@command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Node.js 20 (apt-get install -y nodejs npm)"; exit 1; }
	@mkdir -p .tools/esbuild
	npm install --prefix .tools/esbuild --no-audit --no-fund --loglevel=error $(ESBUILD_PKG)
	@touch $@

# pi-extension rebuilds the pi extension's committed bundle from its
# TypeScript source (backends/pi/extension); a test fails when it is stale.
pi-extension: deps-esbuild
	$(GO) run ./backends/pi/extension/build

vet: fmt-check
	$(GO) vet ./...

fmt-check:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi

build:
	$(GO) build -o bin/iterion ./cmd/iterion

# Longer fuzzing of the parsers of hostile input (not part of make test).
FUZZTIME ?= 5m
fuzz:
	$(GO) test ./dsl -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./dsl -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./dsl/expr -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./dsl/shell -run '^$$' -fuzz '^FuzzScan$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bot/github -run '^$$' -fuzz '^FuzzParseComment$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bot/github -run '^$$' -fuzz '^FuzzParseReply$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bot/github -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bot/repoconfig -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/iterion -run '^$$' -fuzz '^FuzzServeConfig$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/pi/rpc -run '^$$' -fuzz '^FuzzLineReader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./engine/permission -run '^$$' -fuzz '^FuzzDecide$$' -fuzztime $(FUZZTIME)
	$(GO) test ./dsl -run '^$$' -fuzz '^FuzzExpandEnv$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/runchannel -run '^$$' -fuzz '^FuzzParseExecArgs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/runchannel -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/pi -run '^$$' -fuzz '^FuzzOurs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/pi -run '^$$' -fuzz '^FuzzStripJSONComments$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/claudecode -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/claudecode -run '^$$' -fuzz '^FuzzHookInput$$' -fuzztime $(FUZZTIME)
	$(GO) test ./backends/claudecode -run '^$$' -fuzz '^FuzzDecodeSaved$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bot/page -run '^$$' -fuzz '^FuzzOpenSession$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bot/api -run '^$$' -fuzz '^FuzzParseQuestionFilter$$' -fuzztime $(FUZZTIME)
