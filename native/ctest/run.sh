#!/usr/bin/env bash
# Builds every native/ctest/test_*.c together with the engine's C sources
# under AddressSanitizer + UndefinedBehaviorSanitizer and runs it, once with
# 1 compute thread and once with 2 (PICOMETER_TEST_THREADS: the tests'
# default engine configuration); then builds test_engine.c under
# ThreadSanitizer and runs it with 2 threads (the thread pool and the
# threaded kernels). Any sanitizer finding fails the run (halt_on_error, no
# recovery). The tests get the tiny model's path in PICOMETER_TINY_MODEL
# (regenerated each run) and the tiny shape models' directory in
# PICOMETER_SHAPES_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
CC=${CC:-gcc}
out=build/ctest
mkdir -p "$out"
export PICOMETER_TINY_MODEL=${PICOMETER_TINY_MODEL:-$PWD/build/models/tiny.gguf}
# Always regenerate (about 0.2 s) so a change to the model generator never
# leaves a stale file behind.
mkdir -p "$(dirname "$PICOMETER_TINY_MODEL")"
go run ./modelgen/cmd/mkmodel -preset tiny -o "$PICOMETER_TINY_MODEL"
# The tiny-k shape in every file type, for test_engine's typed-model test.
export PICOMETER_TYPED_MODELS=$PWD/$out/models
mkdir -p "$PICOMETER_TYPED_MODELS"
go build -o "$out/mkmodel" ./modelgen/cmd/mkmodel
for type in f32 f16 bf16 q8_0 q4_0 q4_1 q4_k_m q5_k_m q6_k; do
	"$out/mkmodel" -preset tiny-k -type "$type" -o "$PICOMETER_TYPED_MODELS/tiny-k-$type.gguf"
done
# The tiny models with real-model shape features (test_shapes.c).
export PICOMETER_SHAPES_DIR=$PWD/$out/shapes
mkdir -p "$PICOMETER_SHAPES_DIR"
for p in tiny-llama3 tiny-qwen2 tiny-qwen3; do
	"$out/mkmodel" -preset "$p" -o "$PICOMETER_SHAPES_DIR/$p.gguf"
done
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
flags=(-std=c11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE
	-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Inative)
tflags=(-std=c11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE
	-fsanitize=thread -fno-omit-frame-pointer -Inative)
# The engine's sources are compiled once per sanitizer, in parallel, and
# every test links those objects: compiling the kernels under ASan+UBSan
# takes minutes of CPU, and doing it once per test file was most of make
# test's time on a 2-core machine.
compile() { # compile DIR FLAGS... : every native/*.c into DIR/*.o
	local dir=$1
	shift
	rm -rf "$dir"
	mkdir -p "$dir"
	printf '%s\n' native/*.c | xargs -P "$(nproc)" -I{} sh -c \
		'src=$1; dir=$2; shift 2; o=$dir/$(basename "${src%.c}").o; "$@" -c "$src" -o "$o" || { echo "FAIL: compile $src" >&2; exit 255; }' \
		sh {} "$dir" "$CC" "$@"
}
compile "$out/asan" "${flags[@]}"
fail=0
for t in native/ctest/test_*.c; do
	[[ -e $t ]] || continue
	bin=$out/$(basename "${t%.c}")
	"$CC" "${flags[@]}" "$out"/asan/*.o "$t" -o "$bin" -lm -lpthread
	runs=(1 2)
	# the loader, the attention kernels, the sampler and the KV bookkeeping
	# start no threads; test_shapes and test_pool set their own thread counts
	case $t in
	*/test_grammar_mask.c | */test_gguf.c | */test_shapes.c | */test_attend.c | */test_sample.c | */test_kv.c | */test_prefix.c | */test_pool.c)
		runs=(1)
		;;
	esac
	for threads in "${runs[@]}"; do
		echo "== $bin (threads $threads)"
		if ! PICOMETER_TEST_THREADS=$threads "$bin" "native/ctest"; then
			echo "FAIL: $bin (threads $threads)"
			fail=1
		fi
	done
done
compile "$out/tsan" "${tflags[@]}"
bin=$out/test_engine_tsan
"$CC" "${tflags[@]}" "$out"/tsan/*.o native/ctest/test_engine.c -o "$bin" -lm -lpthread
echo "== $bin (threads 2, ThreadSanitizer)"
if ! TSAN_OPTIONS=halt_on_error=1:exitcode=66 PICOMETER_TEST_THREADS=2 "$bin" "native/ctest"; then
	echo "FAIL: $bin"
	fail=1
fi
exit $fail
