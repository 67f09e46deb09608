# picometer — thin targets that say what they do. `make help` lists them.

GO      ?= go
SHELL   := /bin/bash
BIN     := bin
MODELS  := build/models
TINY    := $(MODELS)/tiny.gguf
DEFAULT := $(MODELS)/default.gguf
VM_BIN  := $(BIN)/victoria-metrics
IMAGE   ?= picometer:0.1.0
IMAGE_AR := build/picometer.oci.tar
SE_BIN  := $(BIN)/statsd_exporter

export PICOMETER_TINY_MODEL := $(CURDIR)/$(TINY)
export PICOMETER_NPM_DIR := $(CURDIR)/build/npm

.PHONY: help deps build image run run-stack test test-go test-deploy test-nocgo test-c fuzz bench generate generate-check \
        lint checkmetrics checkrules dashboards e2e models clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

deps: ## install what the tests need and is missing (npm packages under build/npm, …)
	@scripts/deps.sh

build: ## build picometerd (cgo: the C engine) and picometer-sidecar (no cgo: no libc mapped, less RSS) into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./daemon/cmd/picometerd
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./sidecar/cmd/picometer-sidecar

image: models ## the OCI image archive build/picometer.oci.tar (IMAGE=name:tag): FROM scratch, static picometerd and picometer-sidecar, the default model at /models/default.gguf
	@mkdir -p build/image
	$(GO) build -tags netgo,osusergo -trimpath -ldflags '-s -w -linkmode external -extldflags -static' -o build/image/ ./daemon/cmd/picometerd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o build/image/ ./sidecar/cmd/picometer-sidecar
	cd deploy && $(GO) run ./cmd/mkimage -picometerd ../build/image/picometerd -sidecar ../build/image/picometer-sidecar \
		-model ../$(DEFAULT) -ref $(IMAGE) -o ../$(IMAGE_AR)

models: ## generate the tiny and default GGUF models under build/models (deterministic; not committed)
	@mkdir -p $(MODELS)
	$(GO) run ./native/cmd/mkmodel -preset tiny -o $(TINY)
	$(GO) run ./native/cmd/mkmodel -preset default -o $(DEFAULT)

run: build ## build, create the default model if missing, start sidecar + daemon (Ctrl-C stops both)
	@scripts/run.sh

run-stack: build ## like run, plus a local Prometheus with alerts/ loaded (when installed)
	@PICOMETER_STACK=1 scripts/run.sh

test: deps lint models build image $(VM_BIN) test-go test-deploy test-nocgo test-c ## everything CI runs

test-go: ## go test ./... with live checks required (promtool, prometheus, victoria-metrics)
	PICOMETER_LIVE=1 PICOMETER_VM_BIN=$(CURDIR)/$(VM_BIN) PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -timeout 20m ./...

test-deploy: ## deploy/ (its own Go module: Kubernetes, kustomize, GIE, go-containerregistry): manifests strictly decoded, image archive, routing gauges
	cd deploy && $(GO) vet ./...
	cd deploy && PICOMETER_LIVE=1 PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) PICOMETER_DEFAULT_MODEL=$(CURDIR)/$(DEFAULT) PICOMETER_IMAGE=$(CURDIR)/$(IMAGE_AR) \
		$(GO) test -count=1 -timeout 20m ./...

test-nocgo: ## schema/, sidecar/ and native/ build and pass without cgo (native/ promises ErrNoCgo, no panic)
	CGO_ENABLED=0 $(GO) vet ./schema/... ./sidecar/... ./native/...
	CGO_ENABLED=0 $(GO) test -count=1 ./schema/... ./sidecar/... ./native/...

test-c: ## C engine and loader tests under AddressSanitizer + UBSan
	native/ctest/run.sh

fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@scripts/fuzz.sh $${FUZZTIME:-20s}

bench: models build $(SE_BIN) ## benchmarks, printed as a table of medians (BENCHCOUNT runs each, default 5)
	@PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) PICOMETER_STATSD_EXPORTER_BIN=$(CURDIR)/$(SE_BIN) scripts/bench.sh $${BENCHCOUNT:-5}

generate: ## regenerate generated files (schema/METRICS.md, dashboards, rules, then deploy/kubernetes from them)
	$(GO) generate ./...
	cd deploy && $(GO) generate ./...

generate-check: generate ## fail when generated files differ from the committed ones
	git diff --exit-code -- schema/METRICS.md dashboards alerts deploy

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

$(SE_BIN): tools/statsdexporter/go.mod tools/statsdexporter/tools.go ## prometheus/statsd_exporter from the Go module proxy (what the sidecar's budget is measured against)
	@mkdir -p $(BIN)
	cd tools/statsdexporter && $(GO) build -o ../../$(SE_BIN) github.com/prometheus/statsd_exporter

clean: ## remove bin/ and build/
	rm -rf $(BIN) build
