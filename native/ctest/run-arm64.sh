#!/usr/bin/env bash
# Cross-compiles every native/ctest/test_*.c with the engine's C sources
# for ARM64 (Debian's gcc-aarch64-linux-gnu) and runs it under qemu-user
# (qemu-aarch64 from Debian's qemu-user): the portable kernels, the only
# ones an ARM64 build has, checked where no ARM machine is at hand.
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
fail=0
for t in ${TESTS:-native/ctest/test_*.c}; do
	bin=$out/$(basename "${t%.c}")
	"$CC" "${flags[@]}" native/*.c "$t" -o "$bin" -lm -lpthread
	echo "== $bin (aarch64 under $QEMU)"
	if ! PICOMETER_TEST_THREADS=2 "$QEMU" -L /usr/aarch64-linux-gnu "$bin" native/ctest; then
		echo "FAIL: $bin"
		fail=1
	fi
done
exit $fail
