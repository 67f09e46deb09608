package daemon

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/picometer/picometer/schema"
)

// The JSON measurement behind the daemon's choice of encoding/json (doc.go,
// "JSON"): the JSON work of request decoding and of response encoding, with
// encoding/json and with goccy/go-json side by side, on the bodies of
// BenchmarkDecodeCompletion and BenchmarkDecodeChat and a chat response.
//
//	go test ./daemon -run '^$' -bench 'JSON' -count 5

// jsonLib is one JSON implementation's entry points.
type jsonLib struct {
	name      string
	valid     func([]byte) bool
	unmarshal func([]byte, any) error
	marshal   func(any) ([]byte, error)
}

var jsonLibs = []jsonLib{
	{"encoding_json", json.Valid, json.Unmarshal, json.Marshal},
	{"goccy", gojson.Valid, gojson.Unmarshal, gojson.Marshal},
}

// decodeLike makes the library calls the daemon's request decoder makes
// (openai.go, chat.go): the body validated, split into its fields, then
// each field decoded by its type (strings; arrays split, their objects
// split again; numbers and booleans are parsed by the decoder itself).
func decodeLike(lib jsonLib, body []byte) error {
	if !lib.valid(body) {
		return errNotJSON
	}
	return decodeObjectLike(lib, body)
}

var errNotJSON = json.Unmarshal([]byte("x"), new(any))

func decodeObjectLike(lib jsonLib, body []byte) error {
	var fields map[string]json.RawMessage
	if err := lib.unmarshal(body, &fields); err != nil {
		return err
	}
	for _, raw := range fields {
		if err := decodeValueLike(lib, raw); err != nil {
			return err
		}
	}
	return nil
}

func decodeValueLike(lib jsonLib, raw json.RawMessage) error {
	switch raw[0] {
	case '"':
		var s string
		return lib.unmarshal(raw, &s)
	case '{':
		return decodeObjectLike(lib, raw)
	case '[':
		var items []json.RawMessage
		if err := lib.unmarshal(raw, &items); err != nil {
			return err
		}
		for _, it := range items {
			if err := decodeValueLike(lib, it); err != nil {
				return err
			}
		}
	}
	return nil
}

var jsonBodies = []struct{ name, body string }{
	{"completion", `{"model":"picometer-default","prompt":"Hello, picometer! Tell me a story about a robot.","max_tokens":16,"temperature":0.7,"top_p":0.9,"stop":["\n\n"],"stream":true,"stream_options":{"include_usage":true}}`},
	{"chat", `{"model":"picometer-default","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Tell me a story about a robot."}],"max_tokens":16,"stream":true}`},
}

// BenchmarkJSONDecode: the JSON work of decoding a request.
func BenchmarkJSONDecode(b *testing.B) {
	for _, body := range jsonBodies {
		for _, lib := range jsonLibs {
			b.Run(body.name+"/"+lib.name, func(b *testing.B) {
				data := []byte(body.body)
				b.ReportAllocs()
				for b.Loop() {
					if err := decodeLike(lib, data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// chatResponse is a non-streamed chat completion, as appendResponse writes
// it, in struct form for the libraries' Marshal.
type chatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Logprobs     *int   `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
		Details          struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		Extra map[string]float64 `json:"extra"`
	} `json:"usage"`
}

// BenchmarkJSONEncode: encoding a chat response with each library's
// Marshal, and with the daemon's own appenders (response.go) for scale.
func BenchmarkJSONEncode(b *testing.B) {
	m := benchMeta(schema.OpChat)
	text := []byte("Once upon a time, a robot counted tokens. It counted them all, \"exactly\".")
	body := &schema.RequestBody{PromptTokens: 12, CompletionTokens: 16, PrefillTokens: 12, DecodeTokens: 15,
		AdmittedUS: 100, FirstTokenUS: 9000, LastTokenUS: 70000, FinishUS: 70100, ITLUS: make([]int64, 15)}
	var r chatResponse
	r.ID, r.Object, r.Created, r.Model = m.id, "chat.completion", m.created, m.model
	r.Choices = make([]struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Logprobs     *int   `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	}, 1)
	r.Choices[0].Message.Role, r.Choices[0].Message.Content, r.Choices[0].FinishReason = "assistant", string(text), "length"
	r.Usage.PromptTokens, r.Usage.CompletionTokens, r.Usage.TotalTokens = 12, 16, 28
	r.Usage.Extra = map[string]float64{"ttft_s": 0.009, "time_per_output_token_s": 0.004, "itl_mean_s": 0.004, "itl_max_s": 0.004,
		"e2e_s": 0.0701, "queue_s": 0.0001, "prefill_s": 0.0089, "decode_s": 0.0611, "prefill_tokens_per_s": 1348,
		"decode_tokens_per_s": 245, "inter_token_latency_s": 0.0044, "prefill_tokens": 12, "decode_tokens": 15,
		"draft_tokens": 0, "accepted_tokens": 0, "accept_rate": 0}
	for _, lib := range jsonLibs {
		b.Run("chat_response/"+lib.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := lib.marshal(&r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("chat_response/appenders", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		for b.Loop() {
			buf = m.appendResponse(buf[:0], text, nil, "length", body)
		}
	})
}

// BenchmarkJSONSideBySide runs encoding/json and goccy/go-json in
// alternating rounds of 100 operations within one benchmark, so both see the
// same machine load, and reports the median over rounds of goccy's speedup
// (encoding/json time / goccy time; ≥ 1.5 would make goccy worth a
// dependency in the hot paths).
func BenchmarkJSONSideBySide(b *testing.B) {
	var r chatResponse
	r.Choices = make([]struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Logprobs     *int   `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	}, 1)
	r.Choices[0].Message.Content = "Once upon a time, a robot counted tokens."
	r.Usage.Extra = map[string]float64{"ttft_s": 0.009, "e2e_s": 0.07, "queue_s": 0.0001, "decode_s": 0.06}
	ops := map[string]func(lib jsonLib) error{
		"decode_completion": func(lib jsonLib) error { return decodeLike(lib, []byte(jsonBodies[0].body)) },
		"decode_chat":       func(lib jsonLib) error { return decodeLike(lib, []byte(jsonBodies[1].body)) },
		"encode_response":   func(lib jsonLib) error { _, err := lib.marshal(&r); return err },
	}
	for _, name := range []string{"decode_completion", "decode_chat", "encode_response"} {
		op := ops[name]
		b.Run(name, func(b *testing.B) {
			var ratios []float64
			round := func(lib jsonLib) time.Duration {
				start := time.Now()
				for range 100 {
					if err := op(lib); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			for b.Loop() {
				std := round(jsonLibs[0])
				goccy := round(jsonLibs[1])
				ratios = append(ratios, float64(std)/float64(goccy))
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "goccy-speedup")
		})
	}
}
