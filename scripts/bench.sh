#!/usr/bin/env bash
# Runs every benchmark COUNT times (default 5) and summarises them with
# benchstat (medians ± 95% confidence; BENCHSTAT, default bin/benchstat, which
# `make bench` builds). Raw output is kept in build/bench.txt; compare two
# runs with `bin/benchstat old.txt new.txt`. These machines are shared and
# noisy: compare ratios measured side by side within one benchmark, not
# across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
mkdir -p build
export PICOMETER_DEFAULT_MODEL=${PICOMETER_DEFAULT_MODEL:-$PWD/build/models/default.gguf}
go test -run '^$' -bench "${BENCH:-.}" -benchmem -count "$count" -timeout 60m ./... | tee build/bench.txt | grep -E '^(pkg:|Benchmark)' || true
echo
echo "== benchstat over $count runs (raw: build/bench.txt)"
"${BENCHSTAT:-bin/benchstat}" build/bench.txt
