#!/usr/bin/env bash
# Starts the sidecar, feeds it the golden events over its socket, and runs
# promtool check metrics on a live scrape. Fails if promtool reports anything.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bin/picometer-sidecar --socket "$dir/s.sock" --listen "127.0.0.1:$port" 2>"$dir/sidecar.log" &
for _ in $(seq 1 50); do [[ -S $dir/s.sock ]] && break; sleep 0.1; done
cat testdata/events/{hello,request_length,request_abort,request_error,engine}.ndjson |
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); s.close()' "$dir/s.sock"
# Wait until the five events are applied (hello, 3 requests, engine).
for _ in $(seq 1 50); do
	curl -fsS "http://127.0.0.1:$port/metrics" >"$dir/metrics" || true
	grep -q '^picometer_sidecar_events_total{kind="engine"} 1$' "$dir/metrics" && break
	sleep 0.1
done
grep -q '^picometer_sidecar_events_total{kind="engine"} 1$' "$dir/metrics" || { echo "checkmetrics: events not applied"; cat "$dir/sidecar.log"; exit 1; }
promtool check metrics <"$dir/metrics"
echo "checkmetrics: promtool found nothing in $(grep -vc '^#' "$dir/metrics") samples"
