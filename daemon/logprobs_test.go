package daemon

import (
	"encoding/json"
	"math"
	"testing"
)

type chatLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []byte  `json:"-"`
	RawBytes    []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	} `json:"top_logprobs"`
}

// TestE2ELogprobs: chat logprobs/top_logprobs and completions logprobs in
// OpenAI's shapes, one entry per output token, the same streamed or not;
// greedy, each token is its own most likely alternative. native's
// TestLogprobsMatchReference checks the numbers against the reference
// forward pass.
func TestE2ELogprobs(t *testing.T) {
	ts := startTiny(t, nil)
	chat := `{"messages":[{"role":"user","content":"Say hi"}],"max_tokens":10,"temperature":0,"logprobs":true,"top_logprobs":3,"return_token_ids":true`
	var full struct {
		Choices []struct {
			Logprobs struct {
				Content []chatLogprob `json:"content"`
			} `json:"logprobs"`
			TokenIDs []int32 `json:"token_ids"`
		} `json:"choices"`
		Usage usageJSON `json:"usage"`
	}
	r := ts.post("/v1/chat/completions", chat+"}")
	if err := json.Unmarshal(r.body, &full); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	content := full.Choices[0].Logprobs.Content
	if len(content) != full.Usage.CompletionTokens || len(content) == 0 {
		t.Fatalf("%d logprobs for %d tokens: %s", len(content), full.Usage.CompletionTokens, r.body)
	}
	for i, c := range content {
		p := ts.d.codec.piece(full.Choices[0].TokenIDs[i])
		if len(c.TopLogprobs) != 3 || c.Logprob > 0 || math.IsNaN(c.Logprob) || len(c.RawBytes) != len(p) ||
			c.TopLogprobs[0].Logprob != c.Logprob || c.TopLogprobs[0].Token != c.Token ||
			c.TopLogprobs[1].Logprob > c.TopLogprobs[0].Logprob || c.TopLogprobs[2].Logprob > c.TopLogprobs[1].Logprob {
			t.Errorf("token %d: %+v (piece %q)", i, c, p)
		}
		for j, b := range c.RawBytes {
			if byte(b) != p[j] {
				t.Errorf("token %d: bytes %v, piece %q", i, c.RawBytes, p)
			}
		}
	}
	// Streamed: the same entries, chunk by chunk.
	s := ts.stream("/v1/chat/completions", chat+`,"stream":true}`)
	var streamed []chatLogprob
	for _, d := range s.data[:len(s.data)-1] {
		var ch struct {
			Choices []struct {
				Logprobs *struct {
					Content []chatLogprob `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatal(err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Logprobs != nil {
			streamed = append(streamed, ch.Choices[0].Logprobs.Content...)
		}
	}
	a, _ := json.Marshal(content)
	b, _ := json.Marshal(streamed)
	if string(a) != string(b) {
		t.Errorf("streamed logprobs %s\nnot streamed %s", b, a)
	}

	comp := `{"prompt":"Hello","max_tokens":8,"temperature":0,"logprobs":2,"return_token_ids":true`
	var c struct {
		Choices []struct {
			Text     string  `json:"text"`
			TokenIDs []int32 `json:"token_ids"`
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage usageJSON `json:"usage"`
	}
	r = ts.post("/v1/completions", comp+"}")
	if err := json.Unmarshal(r.body, &c); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	lp := c.Choices[0].Logprobs
	n := c.Usage.CompletionTokens
	if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n || lp.TextOffset[0] != 0 {
		t.Fatalf("completion logprobs for %d tokens: %s", n, r.body)
	}
	for i := range lp.Tokens {
		if len(lp.TopLogprobs[i]) < 1 || len(lp.TopLogprobs[i]) > 2 || lp.TokenLogprobs[i] > 0 {
			t.Errorf("token %d: %v %v", i, lp.TokenLogprobs[i], lp.TopLogprobs[i])
		}
		if i > 0 && lp.TextOffset[i] != lp.TextOffset[i-1]+len(ts.d.codec.piece(c.Choices[0].TokenIDs[i-1])) {
			t.Errorf("text_offset %v for tokens %q", lp.TextOffset, lp.Tokens)
		}
	}
	s = ts.stream("/v1/completions", comp+`,"stream":true}`)
	var toks []string
	var offs []int
	for _, d := range s.data[:len(s.data)-1] {
		var ch struct {
			Choices []struct {
				Logprobs *struct {
					Tokens     []string `json:"tokens"`
					TextOffset []int    `json:"text_offset"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatal(err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Logprobs != nil {
			toks = append(toks, ch.Choices[0].Logprobs.Tokens...)
			offs = append(offs, ch.Choices[0].Logprobs.TextOffset...)
		}
	}
	a, _ = json.Marshal([]any{lp.Tokens, lp.TextOffset})
	b, _ = json.Marshal([]any{toks, offs})
	if string(a) != string(b) {
		t.Errorf("streamed %s\nnot streamed %s", b, a)
	}
}
