package schema

import (
	"bytes"
	"fmt"
	"strings"
)

// The routing profile: the few gauges picometerd serves on its own port
// (GET /metrics) for request routers such as the Gateway API Inference
// Extension's endpoint picker, which scrapes every pod every 50 ms and
// treats data older than 2 s as stale. They are read from the engine
// loop's live state at every scrape, not from the 1-s engine snapshot the
// sidecar exports. Each carries a schema family's value under that
// family's Prometheus name and labels and, when the daemon's compat
// setting is on (the default), under vLLM's names too: the names routers
// built for vLLM read.

// Alias is another name a routing gauge is served under.
type Alias struct {
	// Name is the series name, e.g. "vllm:num_requests_waiting".
	Name string
	// Labels are the alias's label names, in order, each with the
	// daemon's value for it documented in Doc.
	Labels []string
	// Doc says who reads the name.
	Doc string
}

// RoutingGauge is one series of the routing profile: a gauge, or a counter
// (the family's kind says which) read live like the gauges.
type RoutingGauge struct {
	// Family is the ID of the schema family whose value, name and labels
	// the gauge carries.
	Family string
	// Help is the "# HELP" text: the family's meaning, read live.
	Help string
	// Aliases are the compat names, served only when compat is on.
	Aliases []Alias
}

// VLLMModelLabel is the label vLLM puts the served model in.
const VLLMModelLabel = "model_name"

// RoutingProfile is the routing profile, in exposition order.
var RoutingProfile = []RoutingGauge{
	{Family: IDRequestsWaiting, Help: "Requests waiting for an engine slot, now.", Aliases: []Alias{{
		Name: "vllm:num_requests_waiting", Labels: []string{VLLMModelLabel},
		Doc: "GIE endpoint picker: queue size (its --total-queued-requests-metric default)",
	}}},
	{Family: IDRequestsRunning, Help: "Requests holding an engine slot, now.", Aliases: []Alias{{
		Name: "vllm:num_requests_running", Labels: []string{VLLMModelLabel},
		Doc: "vLLM's running requests, read by routers that weigh load",
	}}},
	{Family: IDKVCacheUsage, Help: "Fraction of KV-cache blocks in use, now (0 to 1).", Aliases: []Alias{{
		Name: "vllm:kv_cache_usage_perc", Labels: []string{VLLMModelLabel},
		Doc: "vLLM ≥ 0.10's KV-cache usage, a 0–1 fraction despite the name; current GIE default",
	}, {
		Name: "vllm:gpu_cache_usage_perc", Labels: []string{VLLMModelLabel},
		Doc: "its older name, GIE v1.0.0's --kv-cache-usage-percentage-metric default",
	}}},
	{Family: IDPrefixQueries, Help: "Prompt tokens looked up in the prefix cache since the daemon started.", Aliases: []Alias{{
		Name: "vllm:prefix_cache_queries_total", Labels: []string{VLLMModelLabel},
		Doc: "vLLM v1's counter vllm:prefix_cache_queries (tokens); prefix-aware routers and dashboards divide hits by it",
	}}},
	{Family: IDPrefixHits, Help: "Prompt tokens found in the prefix cache since the daemon started.", Aliases: []Alias{{
		Name: "vllm:prefix_cache_hits_total", Labels: []string{VLLMModelLabel},
		Doc: "vLLM v1's counter vllm:prefix_cache_hits (tokens)",
	}}},
	{Family: IDEngineInfo, Help: "Engine configuration; the value is always 1.", Aliases: []Alias{{
		Name: "vllm:cache_config_info", Labels: []string{"block_size", "num_gpu_blocks"},
		Doc: "vLLM's cache configuration (value 1): block size in tokens and KV-cache blocks",
	}}},
}

// LoRAInfoAlias is served under compat with empty adapter lists and
// max_lora "0" (picometer serves no adapters), valued with the daemon's
// start time as vLLM does: the endpoint picker's LoRA metric
// (vllm:lora_requests_info, read by default) is then present and says no
// adapter is loaded, instead of missing.
var LoRAInfoAlias = Alias{
	Name: "vllm:lora_requests_info", Labels: []string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"},
	Doc: "GIE endpoint picker: LoRA adapters (none), valued with the start time",
}

// routingDoc renders the routing profile's section of METRICS.md.
func routingDoc(b *bytes.Buffer) {
	b.WriteString("\n## Routing gauges (picometerd `GET /metrics`)\n\n")
	b.WriteString("picometerd serves these on its own port for request routers (the Gateway API Inference Extension's\n")
	b.WriteString("endpoint picker), read from the engine loop's live state at every scrape (at most one engine step old),\n")
	b.WriteString("not from the 1-s snapshot the sidecar exports. The vLLM names are served while `compat` is on (the\n")
	b.WriteString("default). Declared in `schema/routing.go`. No latency histogram is served here, under either name: vLLM's\n")
	b.WriteString("`vllm:time_to_first_token_seconds` is not served (routers do not read it), so the time to first token's `cache`\n")
	b.WriteString("label, which vLLM's histogram lacks, is only on the sidecar's series; a compat TTFT alias added later must\n")
	b.WriteString("sum over it to keep vLLM's label set.\n\n")
	b.WriteString("| series | labels | family | read by |\n|---|---|---|---|\n")
	for _, g := range RoutingProfile {
		f := Lookup(g.Family)
		var labels []string
		for _, a := range f.Attrs {
			labels = append(labels, "`"+a.PromLabel()+"`")
		}
		fmt.Fprintf(b, "| `%s` | %s | `%s` | schema name: %s |\n", f.PromName(), strings.Join(labels, ", "), f.Name, g.Help)
		for _, a := range g.Aliases {
			routingAliasRow(b, a, f.Name)
		}
	}
	routingAliasRow(b, LoRAInfoAlias, "—")
}

func routingAliasRow(b *bytes.Buffer, a Alias, family string) {
	var labels []string
	for _, l := range a.Labels {
		labels = append(labels, "`"+l+"`")
	}
	fmt.Fprintf(b, "| `%s` | %s | `%s` | compat: %s |\n", a.Name, strings.Join(labels, ", "), family, a.Doc)
}
