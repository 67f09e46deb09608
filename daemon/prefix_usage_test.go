package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPrefixCacheUsage: a repeated prompt's K/V comes from the engine's
// prefix cache, and every endpoint says how much of the prompt did, as
// OpenAI does (usage.prompt_tokens_details.cached_tokens; on /v1/responses
// usage.input_tokens_details.cached_tokens) and in usage.extra; the answer
// is the cold one. With engine.prefix_caching off, nothing is cached.
func TestPrefixCacheUsage(t *testing.T) {
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 4) // 180 byte tokens
	body := `{"prompt":` + jsonString(prompt) + `,"max_tokens":8,"temperature":0}`
	for _, on := range []bool{true, false} {
		ts := startTiny(t, func(c *Config) { c.Engine.PrefixCaching = on })
		var texts []string
		var cached []int
		prompts := 0
		for i := 0; i < 2; i++ {
			r := ts.post("/v1/completions", body)
			if r.status != 200 {
				t.Fatalf("caching %v, request %d: %d %s", on, i, r.status, r.body)
			}
			c := decodeCompletionResponse(t, r.body)
			texts = append(texts, c.text())
			if c.Usage == nil || c.Usage.Details.CachedTokens == nil {
				t.Fatalf("caching %v, request %d: no usage.prompt_tokens_details.cached_tokens", on, i)
			}
			n := *c.Usage.Details.CachedTokens
			if float64(n) != c.Usage.Extra["cached_tokens"] {
				t.Errorf("caching %v, request %d: prompt_tokens_details says %d cached, extra %v", on, i, n, c.Usage.Extra["cached_tokens"])
			}
			if n >= c.Usage.PromptTokens {
				t.Errorf("caching %v, request %d: %d of %d prompt tokens cached (the last is always computed)", on, i, n, c.Usage.PromptTokens)
			}
			cached = append(cached, n)
			prompts += c.Usage.PromptTokens
		}
		// picometerd's own /metrics counts the same tokens, under the
		// schema names and vLLM's, live (published after the loop's next
		// iteration, hence the wait).
		hits := float64(cached[0] + cached[1])
		queries := float64(prompts)
		if !on {
			queries = 0
		}
		var m map[string]float64
		waitFor(t, 10*time.Second, "the routing scrape to count the prefix cache", func() bool {
			m = scrapeRouting(t, ts.url)
			return seriesValue(m, "vllm:prefix_cache_queries_total{") == queries
		})
		for _, name := range []string{"picometer_engine_prefix_cache_hits_total{", "vllm:prefix_cache_hits_total{"} {
			if got := seriesValue(m, name); got != hits {
				t.Errorf("caching %v: %s} = %v, want the requests' cached tokens %v", on, name, got, hits)
			}
		}
		if got := seriesValue(m, "picometer_engine_prefix_cache_queries_total{"); got != queries {
			t.Errorf("caching %v: prefix_cache_queries_total = %v, want the prompt tokens %v", on, got, queries)
		}
		if texts[0] != texts[1] {
			t.Errorf("caching %v: the repeated prompt answered %q, the first %q", on, texts[1], texts[0])
		}
		switch {
		case cached[0] != 0:
			t.Errorf("caching %v: the first request had %d cached tokens", on, cached[0])
		case on && cached[1] < 160:
			t.Errorf("caching on: the repeat reused %d tokens of ~180", cached[1])
		case !on && cached[1] != 0:
			t.Errorf("caching off: the repeat reused %d tokens", cached[1])
		}
		if !on {
			continue
		}
		// /v1/responses reports it as input_tokens_details.
		r := ts.post("/v1/responses", `{"input":`+jsonString(prompt)+`,"max_output_tokens":4}`)
		var v struct {
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				InputDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("responses: %d %s", r.status, r.body)
		}
		r2 := ts.post("/v1/responses", `{"input":`+jsonString(prompt)+`,"max_output_tokens":4}`)
		var v2 struct {
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				InputDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		}
		if r2.status != 200 || json.Unmarshal(r2.body, &v2) != nil {
			t.Fatalf("responses: %d %s", r2.status, r2.body)
		}
		if v2.Usage.InputDetails.CachedTokens < 160 || v2.Usage.InputDetails.CachedTokens >= v2.Usage.InputTokens {
			t.Errorf("responses, repeated: %d of %d input tokens cached", v2.Usage.InputDetails.CachedTokens, v2.Usage.InputTokens)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// seriesValue is the value of the one series of m whose key starts with
// prefix (name and "{"), or -1 when none does.
func seriesValue(m map[string]float64, prefix string) float64 {
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			return v
		}
	}
	return -1
}
