package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file: events_test.go covers it (TestMLCShapes, TestMLCMetrics: MLC-LLM
// keys and values worked out by hand).

// TimeCost is MLC-LLM's TimeCost: the count and sum of step times for one
// batch size, excluding the first sample, which MLC discards as warm-up (the
// engine does the same, so count+1 steps ran when count > 0).
type TimeCost struct {
	Count int64   // steps, excluding warm-up
	Sum   float64 // seconds, excluding warm-up
}

// TimeByBatchSize holds TimeCosts indexed by batch size (index 0 is unused).
// Its JSON form is MLC-LLM's: an object with "mean{batch_size=N}" and
// "count{batch_size=N}" for every N whose count is not 0, plus
// "sum{batch_size=N}" (a picometer extension, so sums stay exact).
type TimeByBatchSize []TimeCost

// MarshalJSON writes the MLC-LLM object form.
func (t TimeByBatchSize) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for n := 1; n < len(t); n++ {
		c := t[n]
		if c.Count == 0 {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendKeyFloat(b, "mean", n, c.Sum/float64(c.Count))
		b = append(b, ',')
		b = fmt.Appendf(b, `"count{batch_size=%d}":%d`, n, c.Count)
		b = append(b, ',')
		b = appendKeyFloat(b, "sum", n, c.Sum)
	}
	return append(b, '}'), nil
}

func appendKeyFloat(b []byte, stat string, n int, v float64) []byte {
	b = fmt.Appendf(b, `"%s{batch_size=%d}":`, stat, n)
	return appendFloat(b, v)
}

func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, '0')
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// UnmarshalJSON reads the MLC-LLM object form. Keys other than
// mean/count/sum{batch_size=N} with N in 1..MaxBatch are an error. When
// "sum" is absent (an MLC-LLM producer), it is mean*count.
func (t *TimeByBatchSize) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*t = (*t)[:0]
		return nil
	}
	var m map[string]float64
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	out := (*t)[:0]
	means := map[int]float64{}
	hasSum := map[int]bool{}
	for k, v := range m {
		stat, n, err := ParseBatchKey(k)
		if err != nil {
			return err
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: value %v out of range", k, v)
		}
		for len(out) <= n {
			out = append(out, TimeCost{})
		}
		switch stat {
		case "count":
			if v != math.Trunc(v) || v > 1<<53 {
				return fmt.Errorf("%s: count %v is not an integer in 0..2^53", k, v)
			}
			out[n].Count = int64(v)
		case "sum":
			out[n].Sum = v
			hasSum[n] = true
		case "mean":
			means[n] = v
		}
	}
	for n, mean := range means {
		if !hasSum[n] {
			out[n].Sum = mean * float64(out[n].Count)
		}
	}
	*t = out
	return nil
}

// ParseBatchKey splits an MLC-LLM key such as "count{batch_size=8}" into its
// statistic ("mean", "count" or "sum") and batch size (1..MaxBatch).
func ParseBatchKey(key string) (stat string, batchSize int, err error) {
	stat, rest, ok := strings.Cut(key, "{batch_size=")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", 0, fmt.Errorf("unknown key %q (want mean|count|sum{batch_size=N})", key)
	}
	switch stat {
	case "mean", "count", "sum":
	default:
		return "", 0, fmt.Errorf("unknown statistic in key %q", key)
	}
	n, err := strconv.Atoi(rest[:len(rest)-1])
	if err != nil || n < 1 || n > MaxBatch {
		return "", 0, fmt.Errorf("batch size in key %q is not in 1..%d", key, MaxBatch)
	}
	return stat, n, nil
}

// SpecDecode is MLC-LLM's SpecDecodeMetrics: per draft position i, how many
// draft tokens were proposed (DraftCount[i]) and accepted (AcceptCount[i]),
// cumulative since boot. Its JSON form adds MLC's derived values:
// accept_prob{step=i} = accept/draft at i, accept_rate{step=i} =
// accept[i]/accept[i-1] (i ≥ 1), accept_len{step=i} = sum of accept_prob up
// to i. Derived values are recomputed, never read back.
type SpecDecode struct {
	DraftCount  []int64
	AcceptCount []int64
}

// MarshalJSON writes the MLC-LLM object form.
func (s SpecDecode) MarshalJSON() ([]byte, error) {
	if len(s.DraftCount) != len(s.AcceptCount) {
		return nil, fmt.Errorf("spec_decode: draft_count has %d positions, accept_count %d", len(s.DraftCount), len(s.AcceptCount))
	}
	b := []byte(`{"draft_count":[`)
	b = appendInts(b, s.DraftCount)
	b = append(b, `],"accept_count":[`...)
	b = appendInts(b, s.AcceptCount)
	b = append(b, `],"accept_prob":{`...)
	lens := make([]float64, len(s.DraftCount))
	acc := 0.0
	for i := range s.DraftCount {
		p := ratio(s.AcceptCount[i], s.DraftCount[i])
		acc += p
		lens[i] = acc
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"accept_prob{step=%d}":`, i)
		b = appendFloat(b, p)
	}
	b = append(b, `},"accept_rate":{`...)
	for i := 1; i < len(s.DraftCount); i++ {
		if i > 1 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"accept_rate{step=%d}":`, i)
		b = appendFloat(b, ratio(s.AcceptCount[i], s.AcceptCount[i-1]))
	}
	b = append(b, `},"accept_len":{`...)
	for i, l := range lens {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"accept_len{step=%d}":`, i)
		b = appendFloat(b, l)
	}
	return append(b, "}}"...), nil
}

// UnmarshalJSON reads draft_count and accept_count (equal lengths, at most
// MaxSpecK, non-negative) and ignores the derived values.
func (s *SpecDecode) UnmarshalJSON(data []byte) error {
	var raw struct {
		DraftCount  []int64 `json:"draft_count"`
		AcceptCount []int64 `json:"accept_count"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if len(raw.DraftCount) != len(raw.AcceptCount) {
		return fmt.Errorf("spec_decode: draft_count has %d positions, accept_count %d", len(raw.DraftCount), len(raw.AcceptCount))
	}
	if len(raw.DraftCount) > MaxSpecK {
		return fmt.Errorf("spec_decode: %d positions, more than %d", len(raw.DraftCount), MaxSpecK)
	}
	for i := range raw.DraftCount {
		if raw.DraftCount[i] < 0 || raw.AcceptCount[i] < 0 {
			return fmt.Errorf("spec_decode: negative count at position %d", i)
		}
	}
	s.DraftCount, s.AcceptCount = raw.DraftCount, raw.AcceptCount
	return nil
}

func appendInts(b []byte, xs []int64) []byte {
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return b
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// MLCMetrics computes the MLC-LLM RequestMetrics of a request from its raw
// facts: ttft_s = first token − arrival, end_to_end_latency_s = finish −
// arrival, prefill_tokens_per_s = prefill tokens / (first token − admission),
// decode_tokens_per_s = decode tokens / (finish − first token), and MLC's
// inter_token_latency_s = end_to_end_latency_s / completion_tokens. Rates
// whose time or token count is 0 are omitted, as MLC-LLM does for counts.
func (r *RequestBody) MLCMetrics() MLCRequestMetrics {
	m := MLCRequestMetrics{
		PromptTokens:     int64(r.PromptTokens),
		CompletionTokens: int64(r.CompletionTokens),
		PrefillTokens:    int64(r.PrefillTokens),
		DecodeTokens:     int64(r.DecodeTokens),
		EndToEndLatencyS: usToS(r.FinishUS),
	}
	if r.FirstTokenUS >= 0 {
		m.TTFTS = usToS(r.FirstTokenUS)
		if d := r.FirstTokenUS - r.AdmittedUS; r.PrefillTokens > 0 && r.AdmittedUS >= 0 && d > 0 {
			m.PrefillTokensPerS = float64(r.PrefillTokens) / usToS(d)
		}
		if d := r.FinishUS - r.FirstTokenUS; r.DecodeTokens > 0 && d > 0 {
			m.DecodeTokensPerS = float64(r.DecodeTokens) / usToS(d)
		}
	}
	if r.CompletionTokens > 0 {
		m.InterTokenLatencyS = m.EndToEndLatencyS / float64(r.CompletionTokens)
	}
	return m
}

func usToS(us int64) float64 {
	if us < 0 {
		return 0
	}
	return float64(us) / 1e6
}
