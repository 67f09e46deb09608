#!/usr/bin/env bash
# Starts the sidecar, feeds it the golden events over its socket, and runs
# promtool check metrics on a live scrape.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bin/picometer-sidecar --socket "$dir/s.sock" --listen "127.0.0.1:$port" &
for _ in $(seq 1 50); do [[ -S $dir/s.sock ]] && break; sleep 0.1; done
cat testdata/events/{hello,request_length,request_abort,request_error,engine}.ndjson |
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); s.close()' "$dir/s.sock"
sleep 0.5
curl -fsS "http://127.0.0.1:$port/metrics" | promtool check metrics
echo "checkmetrics: promtool found nothing"
