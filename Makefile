# picometer — thin targets that say what they do. `make help` lists them.

GO      ?= go
SHELL   := /bin/bash
BIN     := bin
MODELS  := build/models
TINY    := $(MODELS)/tiny.gguf
DEFAULT := $(MODELS)/default.gguf
VM_BIN  := $(BIN)/victoria-metrics

# Parts that later issues add are built only once they exist.
CMDS := $(wildcard daemon/cmd/picometerd sidecar/cmd/picometer-sidecar)
HAVE_MKMODEL := $(wildcard native/cmd/mkmodel)
HAVE_CTEST := $(wildcard native/ctest/run.sh)

export PICOMETER_TINY_MODEL := $(CURDIR)/$(TINY)

.PHONY: help build run run-stack test test-go test-nocgo test-c fuzz bench generate generate-check \
        lint checkmetrics checkrules dashboards e2e models clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

build: ## build picometerd and picometer-sidecar into bin/
	@mkdir -p $(BIN)
ifneq ($(CMDS),)
	$(GO) build -o $(BIN)/ ./daemon/cmd/picometerd
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./sidecar/cmd/picometer-sidecar  # no libc mapped: ~1.7 MiB less RSS
else
	@echo "build: daemon and sidecar are not built yet (no daemon/cmd or sidecar/cmd)"
endif

models: ## generate the tiny and default GGUF models under build/models (not committed)
ifneq ($(HAVE_MKMODEL),)
	@mkdir -p $(MODELS)
	$(GO) run ./native/cmd/mkmodel -preset tiny -o $(TINY)
	$(GO) run ./native/cmd/mkmodel -preset default -o $(DEFAULT)
else
	@echo "models: the model tool is not built yet (no native/cmd/mkmodel)"
endif

run: build ## build, create the default model if missing, start sidecar + daemon (Ctrl-C stops both)
	@scripts/run.sh

run-stack: build ## like run, plus a local Prometheus with alerts/ loaded (when installed)
	@PICOMETER_STACK=1 scripts/run.sh

test: lint models build $(VM_BIN) test-go test-nocgo test-c ## everything CI runs

test-go: ## go test ./... with live checks required (promtool, prometheus, victoria-metrics)
	PICOMETER_LIVE=1 PICOMETER_VM_BIN=$(CURDIR)/$(VM_BIN) PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -timeout 20m ./...

test-nocgo: ## schema/ and sidecar/ build and pass without cgo
	CGO_ENABLED=0 $(GO) vet ./schema/... $(wildcard ./sidecar/...) $(wildcard ./native/...)
	CGO_ENABLED=0 $(GO) test -count=1 ./schema/... $(wildcard ./sidecar/...)

test-c: ## C engine tests under AddressSanitizer + UBSan
ifneq ($(HAVE_CTEST),)
	native/ctest/run.sh
else
	@echo "test-c: no C tests yet (native/ctest/run.sh)"
endif

fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@scripts/fuzz.sh $${FUZZTIME:-20s}

bench: models ## benchmarks, printed as a table of medians (BENCHCOUNT runs each, default 5)
	@scripts/bench.sh $${BENCHCOUNT:-5}

generate: ## regenerate generated files (schema/METRICS.md, dashboards, rules)
	$(GO) generate ./...

generate-check: generate ## fail when generated files differ from the committed ones
	git diff --exit-code -- schema/METRICS.md dashboards alerts

lint: ## gofmt check + go vet
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

checkmetrics: build ## promtool check metrics on a live sidecar scrape
	@scripts/checkmetrics.sh

checkrules: ## promtool check rules + unit tests for alerts/
	promtool check rules alerts/*.rules.yml
	promtool test rules alerts/tests/*.yml

dashboards: ## regenerate dashboards/*.json from schema/
	$(GO) generate ./dashboards/...

e2e: build models $(VM_BIN) ## live end-to-end checks only (daemon + sidecar + Prometheus)
	PICOMETER_LIVE=1 PICOMETER_VM_BIN=$(CURDIR)/$(VM_BIN) PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -run 'Live|E2E' ./...

$(VM_BIN): tools/victoriametrics/go.mod tools/victoriametrics/tools.go ## VictoriaMetrics from the Go module proxy (real OTLP receiver)
	@mkdir -p $(BIN)
	cd tools/victoriametrics && $(GO) build -o ../../$(VM_BIN) github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics

clean: ## remove bin/ and build/
	rm -rf $(BIN) build
