#!/usr/bin/env bash
# Runs every benchmark COUNT times (default 5) and prints a table of medians.
# Raw output is kept in build/bench.txt. These machines are shared and noisy:
# compare ratios measured side by side within one benchmark, not across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
mkdir -p build
export PICOMETER_DEFAULT_MODEL=${PICOMETER_DEFAULT_MODEL:-$PWD/build/models/default.gguf}
go test -run '^$' -bench "${BENCH:-.}" -benchmem -count "$count" -timeout 60m ./... | tee build/bench.txt | grep -E '^(pkg:|Benchmark)' || true
echo
echo "== medians over $count runs (raw: build/bench.txt)"
go run ./tools/benchtable < build/bench.txt
