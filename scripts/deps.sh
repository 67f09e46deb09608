#!/usr/bin/env bash
# make deps: install what the tests need and is missing, then say nothing.
#
#   scripts/deps.sh [GROUP...]     groups: test (default: all of them), prometheus
#
# - Debian packages through apt-get (apt-get update once, only when something
#   is missing), as root, or through `sudo -n` when that works without a
#   password. Otherwise it stops with one message listing the exact commands.
# - npm packages at the versions tools/npm/package-lock.json pins, under
#   build/npm (never committed), reinstalled only when the lockfile changes.
# Go-built tools (bin/victoria-metrics, …) are Makefile targets that `make
# deps` depends on, rebuilt only when their tools/*/go.mod changes.
#
# Prerequisites, not installed here: Debian 12, Go 1.26, gcc, make, git (make run
# needs nothing more). Idempotent; a second run takes well under 2 s.
set -euo pipefail
cd "$(dirname "$0")/.."

groups=("$@")
((${#groups[@]})) || groups=(test)

# has_lib NAME: gcc finds the runtime library NAME (a sanitizer's .so).
has_lib() { [[ $(gcc -print-file-name="$1" 2>/dev/null) == /* ]]; }

# Each check adds the Debian package that provides what is missing.
pkgs=()
need() { pkgs+=("$@"); }
check_prometheus() {
	command -v promtool >/dev/null && command -v prometheus >/dev/null || need prometheus
}
check_test() {
	check_prometheus
	command -v make >/dev/null || need make
	command -v curl >/dev/null || need curl
	command -v git >/dev/null || need git
	command -v gcc >/dev/null || need gcc libc6-dev
	has_lib libasan.so || need libasan8
	has_lib libubsan.so || need libubsan1
	has_lib libtsan.so || need libtsan2
	command -v node >/dev/null || need nodejs
	command -v npm >/dev/null || need npm
	command -v chromium >/dev/null || need chromium
	# Python Jinja2, the second oracle of tokenizer's chat-template corpus test
	python3 -c 'import jinja2' 2>/dev/null || need python3 python3-jinja2
}
for g in "${groups[@]}"; do
	case $g in
	test) check_test ;;
	prometheus) check_prometheus ;;
	*) echo "deps: unknown group $g (test, prometheus)" >&2; exit 2 ;;
	esac
done

if ((${#pkgs[@]})); then
	mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
	if [[ $(id -u) == 0 ]]; then
		sudo=()
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		sudo=(sudo -n)
	else
		cat >&2 <<MSG
deps: these Debian packages are missing and installing them needs root:
    sudo apt-get update
    sudo apt-get install -y --no-install-recommends ${pkgs[*]}
then run make again.
MSG
		exit 1
	fi
	echo "deps: installing ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# build/npm/.installed is a copy of the lockfile written after npm ci
# succeeded: the stamp that says build/npm matches tools/npm.
if [[ " ${groups[*]} " == *" test "* ]] &&
	! cmp -s tools/npm/package-lock.json build/npm/.installed 2>/dev/null; then
	echo "deps: npm packages (tools/npm/package-lock.json) into build/npm"
	rm -rf build/npm
	mkdir -p build/npm
	cp tools/npm/package.json tools/npm/package-lock.json build/npm/
	(cd build/npm && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	cp tools/npm/package-lock.json build/npm/.installed
fi
exit 0
