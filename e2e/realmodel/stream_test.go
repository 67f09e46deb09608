package realmodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// streamed is what one streamed chat completion measured at the client.
type streamed struct {
	ttft   time.Duration   // request sent → first content
	gaps   []time.Duration // between successive content chunks
	tokens int             // usage.completion_tokens, else content chunks
	total  time.Duration
}

// streamChat sends a greedy streamed chat completion and times it.
func streamChat(c *http.Client, addr string, msgs []message, maxTokens int) (streamed, error) {
	body, _ := json.Marshal(map[string]any{"messages": msgs, "temperature": 0, "max_tokens": maxTokens,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	t0 := time.Now()
	resp, err := c.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return streamed{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return streamed{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var s streamed
	var last time.Time
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		data := strings.TrimPrefix(line, "data: ")
		if data == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return s, fmt.Errorf("event %q: %v", data, err)
		}
		now := time.Now()
		if len(ev.Choices) > 0 && ev.Choices[0].Delta.Content != "" {
			if chunks == 0 {
				s.ttft = now.Sub(t0)
			} else {
				s.gaps = append(s.gaps, now.Sub(last))
			}
			last = now
			chunks++
		}
		if ev.Usage != nil && ev.Usage.CompletionTokens > 0 {
			s.tokens = ev.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if chunks == 0 {
		return s, fmt.Errorf("no content")
	}
	if s.tokens == 0 {
		s.tokens = chunks
	}
	s.total = time.Since(t0)
	return s, nil
}

// quantile is the q-quantile (nearest rank) of ds; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// metricLines is the sample lines of a /metrics text whose names start
// with one of prefixes.
func metricLines(c *http.Client, url string, prefixes ...string) string {
	resp, err := c.Get(url)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("(HTTP %d)", resp.StatusCode)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) && !strings.Contains(l, "_bucket{") {
				out = append(out, "    "+l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
