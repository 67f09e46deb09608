#!/usr/bin/env bash
# make iree (opt-in, not part of make deps: ~100 MB): the IREE runtime library
# and compiler that native/iree (go build -tags iree) uses, from PyPI wheels
# at pinned versions and hashes, unpacked under build/iree (never committed).
# docs/IREE.md says why these packages and not iree-base-runtime.
#
#   build/iree/wheels/   the downloaded wheels, kept (a rerun checks hashes only)
#   build/iree/lib/libshortfin.so
#                        shortfin 3.9.0's libshortfin: IREE's runtime C API
#                        (iree_vm_*, iree_hal_*, iree_task_*) with visible
#                        symbols, IREE tag iree-3.10.0rc20251203
#   build/iree/compiler/ iree-base-compiler 3.9.0 unpacked; its iree-compile is
#                        build/iree/compiler/iree/compiler/_mlir_libs/iree-compile
#                        (3.10.0's emits bytecode 16.0, which this runtime
#                        refuses: it reads 15.0)
#   build/iree/runtime/  iree-base-runtime 3.13.0 unpacked, for the inventory
#                        test (native/iree/inventory_test.go) and its tools
set -euo pipefail
cd "$(dirname "$0")/.."

PLAT=(--only-binary=:all: --python-version 3.11 --implementation cp --platform manylinux_2_28_x86_64)

SHORTFIN_WHEEL=shortfin-3.9.0-cp311-cp311-manylinux_2_28_x86_64.whl
SHORTFIN_WHEEL_SHA=ffd95c5fdfddd1169c19cb1f1bc88a4c3a11453ed65d2537870065fc43f32f17
SHORTFIN_LIB=shortfin.libs/libshortfin-16539b35.so.3.9.0
COMPILER_WHEEL=iree_base_compiler-3.9.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
COMPILER_WHEEL_SHA=ae12a51ea4319fc7c12803766b0ba7f98d876765e078293d933d362a852b9be5
RUNTIME_WHEEL=iree_base_runtime-3.13.0-cp311-cp311-manylinux_2_28_x86_64.whl
RUNTIME_WHEEL_SHA=4ecb03d5a33989d765eaa8bf1fe6199a937c88c1004e56c85714532cd95934fa

W=build/iree/wheels
mkdir -p $W build/iree/lib

# fetch FILE SHA REQUIREMENT: download FILE into $W with pip unless it is
# already there with the right hash.
fetch() {
	local file=$1 sha=$2 req=$3
	if [[ -f $W/$file ]] && echo "$sha  $W/$file" | sha256sum -c --status; then
		return 0
	fi
	command -v pip >/dev/null || { echo "iree: pip is missing (python3-pip)" >&2; exit 1; }
	echo "iree: pip download $req"
	rm -f "$W/$file"
	pip download --quiet --no-deps --disable-pip-version-check "${PLAT[@]}" -d $W "$req" >&2
	if ! echo "$sha  $W/$file" | sha256sum -c --status; then
		echo "iree: $W/$file does not have the pinned sha256 $sha" >&2
		exit 1
	fi
}

# unpack FILE DIR: unzip the wheel into DIR once (a stamp names the wheel).
unpack() {
	local file=$1 dir=$2
	[[ -f $dir/.wheel && $(cat "$dir/.wheel") == "$file" ]] && return 0
	rm -rf "$dir"
	mkdir -p "$dir"
	unzip -q "$W/$file" -d "$dir"
	echo "$file" >"$dir/.wheel"
}

fetch $SHORTFIN_WHEEL $SHORTFIN_WHEEL_SHA shortfin==3.9.0
fetch $COMPILER_WHEEL $COMPILER_WHEEL_SHA iree-base-compiler==3.9.0
fetch $RUNTIME_WHEEL $RUNTIME_WHEEL_SHA iree-base-runtime==3.13.0

if [[ ! -f build/iree/lib/libshortfin.so ]]; then
	unzip -p "$W/$SHORTFIN_WHEEL" "$SHORTFIN_LIB" >build/iree/lib/libshortfin.so.tmp
	mv build/iree/lib/libshortfin.so.tmp build/iree/lib/libshortfin.so
fi
unpack $COMPILER_WHEEL build/iree/compiler
unpack $RUNTIME_WHEEL build/iree/runtime
echo "iree: build/iree ready (go test -tags iree ./native/iree)"
