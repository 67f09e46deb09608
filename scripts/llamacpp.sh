#!/usr/bin/env bash
# make deps (llama.cpp group): build the peer engine from the source
# scripts/pypi.sh extracted (llama-cpp-python's vendored llama.cpp) — only
# libllama (what the logit oracle test links) and llama-server (the side-by-side
# benchmark's peer) — and link the result to build/llama.cpp-bin.
#
# The build is a few minutes on 2 cores, so it is cached outside the
# repository, where a fresh clone on the same machine finds it:
#
#   ${PICOMETER_CACHE:-$HOME/.cache/picometer}/llama.cpp-<sdist sha>-<cpu>/bin
#
# keyed by the sdist's sha256 (the source) and a hash of the CPU's flags
# (GGML_NATIVE=ON compiles for this CPU; a cache carried to another CPU must
# not be reused). A complete build leaves bin/.complete; anything else is
# rebuilt. PICOMETER_NO_LLAMACPP=1 skips it (the tests that need it then skip,
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
cache=${PICOMETER_CACHE:-$HOME/.cache/picometer}/llama.cpp-${sdist:0:16}-$cpu
if [[ ! -f $cache/bin/.complete ]]; then
	echo "llamacpp: building libllama and llama-server into $cache (a few minutes on 2 cores, once per source and CPU)"
	start=$SECONDS
	# An interrupted build is resumed: cmake and ninja rebuild only what is
	# missing or stale in work/.
	mkdir -p "$cache"
	gen=()
	command -v ninja >/dev/null && gen=(-G Ninja)
	nice -n 10 cmake -S "$src" -B "$cache/work" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
		-DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
		-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >"$cache/cmake.log" 2>&1 ||
		{ tail -30 "$cache/cmake.log" >&2; echo "llamacpp: cmake configure failed ($cache/cmake.log)" >&2; exit 1; }
	# libllama first (the logit test needs only it), then the server.
	for target in llama llama-server; do
		nice -n 10 cmake --build "$cache/work" --target $target -j "$(nproc)" >>"$cache/build.log" 2>&1 ||
			{ tail -30 "$cache/build.log" >&2; echo "llamacpp: build of $target failed ($cache/build.log)" >&2; exit 1; }
	done
	# bin/: the shared libraries and the server, with their rpath intact
	# (cmake's build tree keeps them in work/bin).
	ln -sfn work/bin "$cache/bin"
	[[ -f $cache/bin/libllama.so && -x $cache/bin/llama-server ]] ||
		{ echo "llamacpp: the build did not produce bin/libllama.so and bin/llama-server" >&2; exit 1; }
	echo "built in $((SECONDS - start)) s" >"$cache/bin/.complete"
	echo "llamacpp: built in $((SECONDS - start)) s"
fi
ln -sfn "$cache/bin" "$link"
exit 0
