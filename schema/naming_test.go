package schema

import "testing"

func TestPromName(t *testing.T) {
	f := func(name, unit string, kind Kind, want string) {
		t.Helper()
		if got := PromName(name, unit, kind); got != want {
			t.Errorf("PromName(%q, %q, %v) = %q, want %q", name, unit, kind, got, want)
		}
	}
	// GenAI semantic-convention names.
	f("gen_ai.server.time_to_first_token", "s", KindHistogram, "gen_ai_server_time_to_first_token_seconds")
	f("gen_ai.server.time_per_output_token", "s", KindHistogram, "gen_ai_server_time_per_output_token_seconds")
	f("gen_ai.server.request.duration", "s", KindHistogram, "gen_ai_server_request_duration_seconds")
	f("gen_ai.client.token.usage", "{token}", KindHistogram, "gen_ai_client_token_usage")
	f("gen_ai.client.operation.duration", "s", KindHistogram, "gen_ai_client_operation_duration_seconds")
	// Counters get _total, annotations add nothing.
	f("picometer.prompt.tokens", "{token}", KindCounter, "picometer_prompt_tokens_total")
	f("picometer.requests.finished", "{request}", KindCounter, "picometer_requests_finished_total")
	f("picometer.engine.batch.time", "s", KindCounter, "picometer_engine_batch_time_seconds_total")
	// _total is moved to the end, not doubled.
	f("http.total.requests", "{request}", KindCounter, "http_requests_total")
	f("foo.total", "s", KindCounter, "foo_seconds_total")
	// A unit word already in the name is not repeated.
	f("process.cpu.seconds", "s", KindCounter, "process_cpu_seconds_total")
	f("picometer.sidecar.last_event.age", "s", KindGauge, "picometer_sidecar_last_event_age_seconds")
	// Unit "1" gives _ratio on gauges and up-down counters only.
	f("picometer.engine.kv_cache.usage", "1", KindGauge, "picometer_engine_kv_cache_usage_ratio")
	f("system.cpu.utilization", "1", KindUpDownCounter, "system_cpu_utilization_ratio")
	f("some.fraction", "1", KindHistogram, "some_fraction")
	f("cache.ratio", "1", KindGauge, "cache_ratio")
	// Gauges without unit, info metrics.
	f("picometer.engine.requests.running", "{request}", KindGauge, "picometer_engine_requests_running")
	f("picometer.engine.info", "", KindInfo, "picometer_engine_info")
	// Other units and per-units.
	f("system.memory.usage", "By", KindUpDownCounter, "system_memory_usage_bytes")
	f("picometer.generation.throughput", "{token}/s", KindGauge, "picometer_generation_throughput_per_second")
	f("net.io", "By/s", KindGauge, "net_io_bytes_per_second")
	f("latency", "ms", KindHistogram, "latency_milliseconds")
	// Separators collapse; other characters split words.
	f("a..b__c-d", "", KindGauge, "a_b_c_d")
	f("My.Metric", "", KindGauge, "My_Metric")
}

func TestPromLabel(t *testing.T) {
	f := func(key, want string) {
		t.Helper()
		if got := PromLabel(key); got != want {
			t.Errorf("PromLabel(%q) = %q, want %q", key, got, want)
		}
	}
	f("gen_ai.request.model", "gen_ai_request_model")
	f("gen_ai.operation.name", "gen_ai_operation_name")
	f("error.type", "error_type")
	f("finish_reason", "finish_reason")
	f("batch_size", "batch_size")
	f("service.instance.id", "service_instance_id")
	f("k8s-pod/name", "k8s_pod_name")
	f("0day", "key_0day")
	f("_private", "key_private")
	f("__reserved", "__reserved")
	f("", "")
}
