#!/usr/bin/env bash
# Cross-compiles every native/ctest/test_*.c with the engine's C sources
# for ARM64 (Debian's gcc-aarch64-linux-gnu) and runs it under qemu-user
# (qemu-aarch64 from Debian's qemu-user): both paths an ARM64 build has,
# portable and neon (qmm_32_neon.c; `auto` picks it there), checked where
# no ARM machine is at hand. The engine's tests run each path by name and
# auto; test_neon.c compares neon with portable bitwise, and runs twice:
# on qemu's cortex-a53 (baseline NEON: the vmull_s8 kernels) and on its
# max CPU (with the dot-product extension: the vdotq_s32 ones too).
# Correctness only: emulation says nothing about speed.
# UndefinedBehaviorSanitizer only: AddressSanitizer's shadow memory does not
# map under qemu-user. Needs the models run.sh writes (run it first, or
# `make models`): the tiny model, build/ctest/models and build/ctest/shapes.
# Not part of make test: it takes minutes under emulation.
set -euo pipefail
cd "$(dirname "$0")/../.."
CC=${CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
for tool in "$CC" "$QEMU"; do
	command -v "$tool" >/dev/null || { echo "run-arm64: $tool is missing (apt-get install gcc-aarch64-linux-gnu qemu-user)" >&2; exit 1; }
done
out=build/arm64
mkdir -p "$out"
export PICOMETER_TINY_MODEL=${PICOMETER_TINY_MODEL:-$PWD/build/models/tiny.gguf}
export PICOMETER_TYPED_MODELS=${PICOMETER_TYPED_MODELS:-$PWD/build/ctest/models}
export PICOMETER_SHAPES_DIR=${PICOMETER_SHAPES_DIR:-$PWD/build/ctest/shapes}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
flags=(-std=c11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE
	-fsanitize=undefined -fno-sanitize-recover=all -Inative)
# the engine's sources once, in parallel, for every test to link
rm -rf "$out/obj"
mkdir -p "$out/obj"
printf '%s\n' native/*.c | xargs -P "$(nproc)" -I{} sh -c \
	'src=$1; dir=$2; shift 2; "$@" -c "$src" -o "$dir/$(basename "${src%.c}").o" || { echo "FAIL: compile $src" >&2; exit 255; }' \
	sh {} "$out/obj" "$CC" "${flags[@]}"
fail=0
for t in ${TESTS:-native/ctest/test_*.c}; do
	bin=$out/$(basename "${t%.c}")
	"$CC" "${flags[@]}" "$out"/obj/*.o "$t" -o "$bin" -lm -lpthread
	cpus=(max)
	[[ $t == */test_neon.c ]] && cpus=(cortex-a53 max)
	for cpu in "${cpus[@]}"; do
		echo "== $bin (aarch64 under $QEMU -cpu $cpu)"
		if ! PICOMETER_TEST_THREADS=2 "$QEMU" -cpu "$cpu" -L /usr/aarch64-linux-gnu "$bin" native/ctest; then
			echo "FAIL: $bin (-cpu $cpu)"
			fail=1
		fi
	done
done
exit $fail
