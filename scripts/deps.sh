#!/usr/bin/env bash
# Installs what the tests need, when it is missing. (Skeleton: npm only; the
# Debian packages and Go-built tools follow.)
set -euo pipefail
cd "$(dirname "$0")/.."

npm_dir=build/npm
# npm packages at the versions tools/npm/package-lock.json pins, under build/npm.
if ! cmp -s tools/npm/package-lock.json "$npm_dir/package-lock.json" 2>/dev/null ||
	[[ ! -d $npm_dir/node_modules ]]; then
	mkdir -p "$npm_dir"
	cp tools/npm/package.json tools/npm/package-lock.json "$npm_dir/"
	(cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
