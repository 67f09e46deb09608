// Package sidecar is picometer-sidecar: it reads the NDJSON metric events
// that picometerd daemons write to a unix socket and exports them, with the
// names, units, labels and buckets of package schema, as Prometheus text on
// /metrics (github.com/VictoriaMetrics/metrics) and over OTLP (the
// OpenTelemetry Go SDK).
//
// One file per concern: config.go (TOML, flags, OTEL_* variables; the
// shared rules are internal/config's), socket.go (listener, line limit,
// per-connection reader, which decodes with schema.Decoder: the wire format
// is schema/'s alone), aggregate.go (the aggregator and its connections),
// target.go (targets and boots), apply_request.go, apply_totals.go and
// apply_engine.go (applying the three kinds of events), expire.go (expiry),
// registry.go (the series, by owner, and their OTLP shadows), exposition.go
// (/metrics, written from the values), openmetrics.go (the same in
// OpenMetrics, for a scraper that asks), exemplars.go (each bucket's last
// traced request), histogram.go ("le" histograms),
// cumhist.go (the request histograms, settable to a daemon's totals), otlp.go
// (producer, exporters, resource), self.go (self-metrics) and sidecar.go
// (wiring); cmd/picometer-sidecar is main.
//
// # Input
//
// Every connection starts with a hello (boot id, model, engine, version,
// engine configuration). A rejected line is counted in
// picometer_sidecar_decode_errors_total by its reason and skipped;
// unsupported_version and line_too_long also close the connection.
//
// # Bounds
//
// Nothing a producer sends can grow the sidecar without bound (issue 13).
// max_targets (64) caps the (model, engine) targets: a hello that would add
// one more is refused (too_many_targets, the connection is closed); label
// values are at most schema.MaxLabelBytes and label sets are schema's
// closed ones. max_connections (64) caps the connections: one more is
// closed at once (too_many_connections). A connection's line buffer starts
// at 64 KiB and grows, up to max_line_bytes+1, only from a budget all
// connections share (max_buffered_bytes, 16 MiB): a partial line that needs
// more closes its connection (buffer_full). Series belong to their target
// in the registry (a list per target and family, sorted by name when a
// series is registered), so expiry drops a target's series at once, and the
// global lock is taken per target, never across the pass: 1,000 targets
// expire in milliseconds. At the caps (64 targets with 210-byte model
// names, ~10 MB of text) /metrics renders in ~1.2 ms with no allocation
// (BenchmarkScrapeAtCaps, median of 6; metrics.Set took ~30 ms and
// allocated ~41 MB per scrape, and over HTTP during a hello flood, with the
// 8 MiB memory limit, the collector ran through it: 730 ms median). Over
// HTTP during the flood the median scrape is ~17 ms, ~30 ms on a machine
// loaded 3-fold, ~11 ms of the sidecar's CPU each (TestLiveHelloFlood,
// which asserts a median under 100 ms).
// A hello that claims a boot another connection holds waits up to
// BootInUseWait (1 s) for that connection to end (a reconnecting daemon may
// say hello before the sidecar has read the end of its old connection),
// then is refused (boot_in_use). A connecting process whose uid is not in
// allowed_uids and whose gid is not in allowed_gids (SO_PEERCRED; by
// default the sidecar's own uid and gid) is closed at once
// (peer_not_allowed); peer.go, Linux only.
// Out-of-set label values are rejected (invalid_field), never new series.
// Request lines in the form daemons write them take schema.Decoder's fast
// path, which yields the same event as schema.Decode (a differential fuzz
// test in schema/ holds the two together).
//
// # Series and exactness
//
// Series carry the hello's model and engine (a target); daemons sharing both
// add up. Request events are observed as they come: TTFT (labelled by
// schema.CacheOutcome of the event's cached_tokens and prompt_tokens and the
// boot's hello block_size), time per output
// token ((last−first)/(completion−1), two tokens or more), request duration
// (with error.type for errors and aborts; an abort without one is "_OTHER"),
// one ITL observation per gap, queue, prefill and decode phases; prompt and
// generation token counters; prompt and generation length histograms for
// requests that reached the engine (admitted); finished requests by finish
// reason, failed ones by error type. A target's first hello starts its
// request series at zero, so that rate() sees the first requests: for both
// operations every request histogram (but the duration of failures, which
// appears with its first failure of each error type; the time to first
// token once per cache outcome: hit, partial, miss), the token counters,
// requests_finished by every finish reason and requests_failed by every
// error type (22 histograms and 34 counters, about 550 exposition lines).
//
// Request series are cumulative per boot too (issue 13). A request event is
// added, by schema.TotalsBody.Add, to its boot's totals and to its target's;
// the request counters and histograms show the target's. A totals event (a
// daemon's own cumulative request totals, sent after each hello and each
// engine snapshot) raises every part of its boot's totals (counter, bucket,
// sum) that is below the daemon's to it, and the target's by as much: so
// after a sidecar restart, a hang, or events lost on the way or dropped by
// the daemon, every request counter and histogram _count/_sum equals, one
// totals event later, the sum of the daemons' own numbers; requests after
// the totals' seq are added as they come, and a request event at or below
// the boot's last totals' seq (only a replay on another connection can be)
// is stale_seq, so nothing is counted twice; no part ever goes down. The
// request events counted from totals, not received, are
// picometer_sidecar_events_recovered_total.
//
// Engine snapshots are cumulative per boot. An exported engine counter is
// the sum over the target's boots of their latest cumulative values, plus
// the totals of boots it forgot: monotonic across restarts and, for one
// boot, equal to the daemon's number bit for bit. A snapshot whose counter
// is below its boot's previous one is rejected whole (invalid_field).
// picometer.spec_decode.drafts is draft_count[0]: every draft proposes a
// token at position 0, so the drafts are the position-0 draft tokens.
// events_dropped, events_write_failed and steps_dropped feed the daemon
// drop counter with reasons queue_full, write_failed and step_ring. Step records feed the step histograms by phase.
//
// Gauges (running, waiting, slots: summed; KV-cache usage: a single boot's
// value, else used over total blocks) and engine_info follow the connected
// boots, or the last reporting one when none is connected. Sequence gaps
// count as lost events; a repeated or older seq on a connection is
// stale_seq; the first event the sidecar sees of a boot sets the baseline.
// The baseline belongs to the connection: a connection's first event is
// compared with the boot's last one only to count a gap, so a connection
// that claimed a boot with seq 2^64−1 cannot make another connection's
// events stale. A boot that is connected cannot be claimed by a second
// connection (boot_in_use, the connection is closed). Values are
// range-checked by schema (token counts, durations, cumulative counts) and
// an event that would take a counter past 2^63−1 is rejected whole
// (invalid_field): counters never wrap. When a target's last
// connection closes, its series stay until expire_after, then disappear
// from both outputs.
//
// # Outputs
//
// /metrics writes, per schema family in schema order, "# HELP" with the
// schema's help, "# TYPE", then that family's series of every target
// ("le" histograms with the schema bounds), with Content-Type
// text/plain; version=0.0.4, uncompressed (gzip would cost ~8 ms of CPU per
// scrape at the caps for ~1 ms of text: BenchmarkScrapeGzip). The text is
// written straight from the values (VictoriaMetrics/metrics counters and
// gauges, and leHistogram) into one pooled buffer, byte for byte what
// metrics.Set.WritePrometheus wrote (exposition_test.go compares the two).
// OTLP does not record a second time: an
// sdk/metric Producer reads the same counters and gauges, and histogram
// shadows fed by the same observations (kept only when OTLP is on), so both
// outputs carry the same numbers; points are cumulative with the schema's
// explicit bounds. Export failures are counted and logged, never fatal.
//
// # Status page
//
// GET / serves a page a person reads without Prometheus or Grafana: one
// self-contained HTML document (inline CSS, SVG drawn by the sidecar, no
// script, nothing fetched from elsewhere, so it works offline) that reloads
// itself every 5 s. Per target, over the last 15 minutes: requests and
// errors per second by error type; TTFT p50/p99, ITL p50/p99 and time per
// output token p50; generated and prompt tokens per second; running
// requests against slots, waiting requests; KV-cache usage; speculative
// acceptance rate (accepted over drafted tokens) and accepted tokens per
// draft; the mean decode step time by batch size (MLC-LLM's
// decode_time_by_batch_size, since start). Then the sidecar's health:
// events per second, events lost (sequence gaps) and dropped by daemons,
// rejected lines by reason.
//
// GET /api/v1/status is the same as JSON: "time", "step_seconds",
// "quantile_window_seconds", "times" (unix seconds of the steps, oldest
// first), "sidecar" (connections, events_total and rejected_total by kind
// and reason, series events_per_second and rejected_per_second by reason)
// and "targets", each with model, engine, connected, "totals" (requests,
// errors, prompt_tokens, generation_tokens, events_lost, events_dropped,
// spec_draft_tokens, spec_accepted_tokens, constrained_requests,
// constrained_valid, tool_calls, prefix_cache_queries, prefix_cache_hits
// (prompt tokens looked up in the prefix cache and found there: hits over
// queries is the hit ratio, which the page shows), errors_by_type), "now"
// (the gauges, prefix_cache_blocks among them), ttft_by_cache ({hit, partial,
// miss}, each {requests, mean_seconds}: the time to first token by cache
// outcome since the target appeared, mean null without a request; the page
// shows them), constraint_mean_seconds ({mask_per_token, compile}: the
// means of the grammar mask time per token and of compile time, 0 without
// a constrained request), decode_time_by_batch_size ([{batch_size, steps,
// mean_seconds}]) and "series": one array per quantity, aligned with
// "times", null where there is no value (requests_per_second,
// errors_per_second, generation_tokens_per_second,
// prompt_tokens_per_second, ttft_p50_seconds, ttft_p99_seconds,
// itl_p50_seconds, itl_p99_seconds, time_per_output_token_p50_seconds,
// requests_running, slots, requests_waiting, kv_cache_usage_ratio,
// spec_acceptance_ratio, spec_accepted_per_draft, events_lost_per_second,
// events_dropped_per_second, errors_per_second_by_type).
//
// Totals and gauges are read when the page is asked for, from the series
// /metrics writes, so they equal the exposition's at that moment. The
// history is sampled by a ticker every HistoryStep (5 s) into fixed rings of
// HistoryLen (180) steps for up to MaxHistoryTargets (16) targets, about
// 30 KiB each; nothing is added to the per-event path. Rates are counter
// deltas over a step (a counter that went down restarts from zero, as in
// rate()); latency quantiles are histogram_quantile over the bucket deltas
// of a QuantileWindow (1 min) window, read from the histogram families' own
// exposition. Files: reading.go (the read-only view of the aggregation),
// history.go (rings and sampler), quantile.go, status.go (JSON), page.go
// and page.css (HTML).
package sidecar
