#!/usr/bin/env bash
# Runs every benchmark COUNT times (default 5) and summarises them with
# benchstat (medians ± 95% confidence; BENCHSTAT, default bin/benchstat, which
# `make bench` builds). Raw output is kept in build/bench.txt; compare two
# runs with `bin/benchstat old.txt new.txt`. These machines are shared and
# noisy: compare ratios measured side by side within one benchmark, not
# across runs.
#
# The engine's per-type benchmark (native BenchmarkTypes) runs on the models
# in PICOMETER_BENCH_MODELS (comma-separated GGUF paths) at the thread counts
# in PICOMETER_BENCH_THREADS (default 1,2). Unset, the models are the default
# shape, and the smollm2-135m shape when modelgen has that preset, in F16,
# Q8_0, Q4_0 and Q4_K_M, written here under build/models when missing.
# A failing benchmark fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
mkdir -p build/models build/bin
export PICOMETER_DEFAULT_MODEL=${PICOMETER_DEFAULT_MODEL:-$PWD/build/models/default.gguf}
if [[ -z ${PICOMETER_BENCH_MODELS:-} ]]; then
	go build -o build/bin/mkmodel ./native/cmd/mkmodel
	models=()
	for preset in default smollm2-135m; do
		for type in f16 q8_0 q4_0 q4_k_m; do
			out=build/models/$preset-$type.gguf
			if [[ ! -e $out ]]; then
				if ! msg=$(build/bin/mkmodel -preset "$preset" -type "$type" -o "$out" 2>&1); then
					if [[ $msg == *"-preset \"$preset\""* ]]; then
						echo "bench: no $preset preset in modelgen; skipping that shape"
						break
					fi
					echo "$msg" >&2
					exit 1
				fi
			fi
			models+=("$PWD/$out")
		done
	done
	PICOMETER_BENCH_MODELS=$(IFS=,; echo "${models[*]}")
	export PICOMETER_BENCH_MODELS
fi
set +e
go test -run '^$' -bench "${BENCH:-.}" -benchmem -count "$count" -timeout 90m ./... 2>&1 | tee build/bench.txt | grep -E '^(pkg:|Benchmark|--- FAIL|FAIL|panic)'
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
	echo "bench: go test -bench failed (status $status); see build/bench.txt" >&2
	exit "$status"
fi
echo
echo "== benchstat over $count runs (raw: build/bench.txt)"
"${BENCHSTAT:-bin/benchstat}" build/bench.txt
