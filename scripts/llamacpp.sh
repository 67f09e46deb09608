#!/usr/bin/env bash
# Build the peer engine from the source scripts/pypi.sh extracted
# (llama-cpp-python's vendored llama.cpp) and link the result to
# build/llama.cpp-bin:
#
#   scripts/llamacpp.sh          libllama only: what the logit oracle test links
#                                (make deps, so make test)
#   scripts/llamacpp.sh server   libllama, llama-server (the side-by-side serving
#                                benchmark's peer), llama-bench and llama-batched-bench
#                                (tools/vs-llamacpp's peers) (make llamacpp, make bench)
#
# The build is a few minutes on 2 cores, so it is cached outside the
# repository, where a fresh clone on the same machine finds it:
#
#   ${PICOMETER_CACHE:-$HOME/.cache/picometer}/llama.cpp-<sdist sha>-<cpu>/bin
#
# keyed by the sdist's sha256 (the source) and a hash of the CPU's flags
# (GGML_NATIVE=ON compiles for this CPU; a cache carried to another CPU must
# not be reused). LLAMACPP_CPU=avx2 builds for any AVX2 CPU instead
# (GGML_NATIVE=OFF: SSE4.2, AVX, AVX2, BMI2, FMA, F16C and nothing newer),
# cached as llama.cpp-<sdist sha>-avx2 and linked to build/llama.cpp-avx2-bin:
# the peer of picometer's forced AVX2 path on a CPU with more (make
# llamacpp-avx2; tools/vs-llamacpp takes it as LLAMA_CPP_BIN). A complete build leaves .<target>-complete; anything else is
# built again (resumed). PICOMETER_NO_LLAMACPP=1 skips it (the tests that need it then skip,
# except under PICOMETER_LIVE=1). Runs under nice: the machines are shared.
set -euo pipefail
cd "$(dirname "$0")/.."

src=build/llama.cpp
link=build/llama.cpp-bin
if [[ ${PICOMETER_NO_LLAMACPP:-} == 1 ]]; then
	exit 0
fi
if [[ ! -f $src/.picometer-sdist ]]; then
	echo "llamacpp: $src is missing; scripts/pypi.sh extracts it" >&2
	exit 1
fi
for tool in cmake g++; do
	command -v $tool >/dev/null || { echo "llamacpp: $tool is missing (apt-get install cmake g++)" >&2; exit 1; }
done
sdist=$(cat "$src/.picometer-sdist")
cpu=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)
native=ON
case ${LLAMACPP_CPU:-native} in
native) ;;
avx2)
	cpu=avx2 native=OFF link=build/llama.cpp-avx2-bin
	grep -qw avx2 /proc/cpuinfo || { echo "llamacpp: LLAMACPP_CPU=avx2: this CPU has no AVX2" >&2; exit 1; }
	;;
*)
	echo "llamacpp: LLAMACPP_CPU: unknown \"$LLAMACPP_CPU\" (want native or avx2)" >&2
	exit 2
	;;
esac
cache=${PICOMETER_CACHE:-$HOME/.cache/picometer}/llama.cpp-${sdist:0:16}-$cpu
targets=(llama)
want=$cache/work/bin/libllama.so
if [[ ${1:-} == server ]]; then
	targets=(llama llama-server llama-bench llama-batched-bench)
	want=$cache/work/bin/llama-batched-bench
fi
stamp=$cache/.${targets[-1]}-complete
if [[ ! -f $stamp || ! -e $want ]]; then
	echo "llamacpp: building ${targets[*]} into $cache (minutes on 2 cores, once per source and CPU)"
	start=$SECONDS
	# An interrupted build is resumed: cmake and ninja rebuild only what is
	# missing or stale in work/.
	mkdir -p "$cache"
	gen=()
	command -v ninja >/dev/null && gen=(-G Ninja)
	if [[ ! -f $cache/work/CMakeCache.txt ]]; then
		nice -n 10 cmake -S "$src" -B "$cache/work" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
			-DGGML_NATIVE=$native -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
			-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
			-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >"$cache/cmake.log" 2>&1 ||
			{ tail -30 "$cache/cmake.log" >&2; echo "llamacpp: cmake configure failed ($cache/cmake.log)" >&2; exit 1; }
	fi
	# libllama first (the logit test needs only it), then the server and benches.
	for target in "${targets[@]}"; do
		nice -n 10 cmake --build "$cache/work" --target "$target" -j "$(nproc)" >>"$cache/build.log" 2>&1 ||
			{ tail -30 "$cache/build.log" >&2; echo "llamacpp: build of $target failed ($cache/build.log)" >&2; exit 1; }
	done
	[[ -e $want ]] || { echo "llamacpp: the build did not produce $want" >&2; exit 1; }
	echo "built in $((SECONDS - start)) s" >"$stamp"
	echo "llamacpp: built ${targets[*]} in $((SECONDS - start)) s"
fi
# bin/: the shared libraries and the server, with their rpath intact (cmake's
# build tree keeps them in work/bin).
ln -sfn work/bin "$cache/bin"
ln -sfn "$cache/bin" "$link"
exit 0
