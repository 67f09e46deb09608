package daemon

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

func textPrompt(s string) []int32 { return tokenizeText(nil, s) }

func TestDecodeCompletion(t *testing.T) {
	base := func(prompt []int32) genRequest {
		return genRequest{Op: schema.OpTextCompletion, PromptParam: "prompt", Prompt: prompt, Temperature: 1, TopP: 1, MaxTokensParam: "max_tokens"}
	}
	ok := []struct {
		name string
		body string
		want func(r *genRequest)
	}{
		{"string prompt", `{"prompt":"hi"}`, func(r *genRequest) {}},
		{"list of one string", `{"prompt":["hi"]}`, func(r *genRequest) {}},
		{"token ids used as sent", `{"prompt":[256,104,105]}`, func(r *genRequest) {}},
		{"list of one token list", `{"prompt":[[256,104,105]]}`, func(r *genRequest) {}},
		{"all parameters", `{"model":"m","prompt":"hi","max_tokens":5,"temperature":0,"top_p":0.5,"top_k":3,"seed":-1,
			"stop":["a","b"],"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},
			"user":"u","n":1,"best_of":1,"echo":false,"suffix":"","presence_penalty":0,"frequency_penalty":0,
			"logit_bias":{},"logprobs":null,"return_token_ids":true,"unknown_field":[1,2]}`,
			func(r *genRequest) {
				r.Model, r.MaxTokens, r.Temperature, r.TopP, r.TopK = "m", 5, 0, 0.5, 3
				r.Seed, r.HasSeed, r.Stop, r.Stream, r.IncludeUsage, r.ContinuousUsage = ^uint64(0), true, []string{"a", "b"}, true, true, true
				r.User, r.ReturnTokenIDs = "u", true
			}},
		{"stop as a string", `{"prompt":"hi","stop":"\n"}`, func(r *genRequest) { r.Stop = []string{"\n"} }},
		{"penalties", `{"prompt":"hi","presence_penalty":-2,"frequency_penalty":1.5,"repetition_penalty":1.2}`, func(r *genRequest) {
			r.PresencePenalty, r.FrequencyPenalty, r.RepetitionPenalty = -2, 1.5, 1.2
		}},
		{"top_k -1 means all", `{"prompt":"hi","top_k":-1}`, func(r *genRequest) {}},
		{"top_k above the vocabulary is clamped", `{"prompt":"hi","top_k":100000}`, func(r *genRequest) { r.TopK = native.VocabSize }},
		{"nulls are absent", `{"prompt":"hi","max_tokens":null,"stop":null,"stream":null,"n":null}`, func(r *genRequest) {}},
		{"unicode prompt is bytes", `{"prompt":"é"}`, func(r *genRequest) { r.Prompt, r.Text = []int32{native.TokBOS, 0xc3, 0xa9}, "é" }},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			var got genRequest
			if err := decodeCompletion([]byte(tc.body), &got); err != nil {
				t.Fatalf("error %d %s: %s", err.Status, err.Param, err.Message)
			}
			want := base(textPrompt("hi"))
			want.Text, want.IsText = "hi", true // the text a model's own tokenizer re-tokenizes (codec.prompt)
			if strings.Contains(tc.name, "token") {
				want.Prompt, want.Text, want.IsText = []int32{256, 104, 105}, "", false
			}
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// errCase is a body that must be rejected with a 400 naming param, with a
// message containing msg.
type errCase struct {
	name, body, param, code, msg string
}

func checkErr(t *testing.T, e *apiError, tc errCase) {
	t.Helper()
	if e == nil {
		t.Fatalf("accepted, want a 400 for %s", tc.param)
	}
	if e.Status != 400 || e.Type != "invalid_request_error" || e.Kind != schema.ErrInvalidRequest {
		t.Errorf("status %d type %s kind %s, want 400 invalid_request_error invalid_request", e.Status, e.Type, e.Kind)
	}
	if e.Param != tc.param || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
		t.Errorf("got param %q code %q message %q\nwant param %q code %q message containing %q", e.Param, e.Code, e.Message, tc.param, tc.code, tc.msg)
	}
}

func TestDecodeCompletionErrors(t *testing.T) {
	for _, tc := range []errCase{
		{"empty body", ``, "", "invalid_json", "The request body is empty"},
		{"malformed JSON", `{"prompt":`, "", "invalid_json", "not valid JSON: unexpected end of JSON input"},
		{"trailing garbage", `{"prompt":"x"} x`, "", "invalid_json", "not valid JSON"},
		{"not an object", `["prompt"]`, "", "invalid_json", "must be a JSON object, but got an array"},
		{"missing prompt", `{"max_tokens":3}`, "prompt", "missing_required_parameter", "Missing required parameter: 'prompt'."},
		{"prompt a number", `{"prompt":5}`, "prompt", "invalid_type", "expected a string, a list of strings or a list of token ids, but got an integer"},
		{"prompt empty list", `{"prompt":[]}`, "prompt", "invalid_value", "the list is empty"},
		{"several prompts", `{"prompt":["a","b"]}`, "prompt", "unsupported_parameter", "a list of 2 prompts"},
		{"token out of vocabulary", `{"prompt":[1,264]}`, "prompt[1]", "invalid_value", "token id 264 is not in the vocabulary (0..263)"},
		{"token not an integer", `{"prompt":[1,"a"]}`, "prompt[1]", "invalid_type", "expected a token id (an integer), but got a string"},
		{"token list of lists", `{"prompt":[[1],[2]]}`, "prompt", "unsupported_parameter", "a list of 2 prompts"},
		{"max_tokens a string", `{"prompt":"x","max_tokens":"16"}`, "max_tokens", "invalid_type", "Invalid type for 'max_tokens': expected an integer, but got a string instead."},
		{"max_tokens a decimal", `{"prompt":"x","max_tokens":1.5}`, "max_tokens", "invalid_type", "but got a decimal"},
		{"max_tokens 0", `{"prompt":"x","max_tokens":0}`, "max_tokens", "invalid_value", "expected a value >= 1, but got 0"},
		{"max_tokens huge", `{"prompt":"x","max_tokens":99999999999999999999}`, "max_tokens", "invalid_value", "out of range"},
		{"temperature a string", `{"prompt":"x","temperature":"hot"}`, "temperature", "invalid_type", "expected a number, but got a string"},
		{"temperature too high", `{"prompt":"x","temperature":2.5}`, "temperature", "invalid_value", "expected a value in [0, 2], but got 2.5"},
		{"temperature negative", `{"prompt":"x","temperature":-1}`, "temperature", "invalid_value", "got -1"},
		{"temperature overflow", `{"prompt":"x","temperature":1e999}`, "temperature", "invalid_value", "out of range"},
		{"top_p 0", `{"prompt":"x","top_p":0}`, "top_p", "invalid_value", "expected a value in (0, 1]"},
		{"top_p above 1", `{"prompt":"x","top_p":1.01}`, "top_p", "invalid_value", "(0, 1]"},
		{"top_k -2", `{"prompt":"x","top_k":-2}`, "top_k", "invalid_value", "got -2"},
		{"seed a bool", `{"prompt":"x","seed":true}`, "seed", "invalid_type", "expected an integer, but got a boolean"},
		{"n 2", `{"prompt":"x","n":2}`, "n", "unsupported_parameter", "n must be 1, but got 2"},
		{"best_of 2", `{"prompt":"x","best_of":2}`, "best_of", "unsupported_parameter", "best_of must be 1"},
		{"logprobs above 5", `{"prompt":"x","logprobs":6}`, "logprobs", "invalid_value", "expected a value in [0, 5], but got 6"},
		{"logprobs negative", `{"prompt":"x","logprobs":-1}`, "logprobs", "invalid_value", "[0, 5]"},
		{"logprobs a bool", `{"prompt":"x","logprobs":true}`, "logprobs", "invalid_type", "expected an integer"},
		{"echo", `{"prompt":"x","echo":true}`, "echo", "unsupported_parameter", "echo"},
		{"suffix", `{"prompt":"x","suffix":"end"}`, "suffix", "unsupported_parameter", "insertion"},
		{"presence_penalty above 2", `{"prompt":"x","presence_penalty":2.5}`, "presence_penalty", "invalid_value", "expected a value in [-2, 2], but got 2.5"},
		{"frequency_penalty below -2", `{"prompt":"x","frequency_penalty":-3}`, "frequency_penalty", "invalid_value", "[-2, 2]"},
		{"frequency_penalty a string", `{"prompt":"x","frequency_penalty":"1"}`, "frequency_penalty", "invalid_type", "expected a number"},
		{"repetition_penalty 0", `{"prompt":"x","repetition_penalty":0}`, "repetition_penalty", "invalid_value", "(0, 10]"},
		{"logit_bias", `{"prompt":"x","logit_bias":{"1":5}}`, "logit_bias", "unsupported_parameter", "logit biases"},
		{"logit_bias an array", `{"prompt":"x","logit_bias":[]}`, "logit_bias", "invalid_type", "expected an object"},
		{"stop a number", `{"prompt":"x","stop":1}`, "stop", "invalid_type", "expected a string or a list of strings"},
		{"stop list with a number", `{"prompt":"x","stop":["a",1]}`, "stop[1]", "invalid_type", "expected a string, but got an integer"},
		{"stop empty string", `{"prompt":"x","stop":""}`, "stop", "invalid_value", "stop string 0 has 0 bytes"},
		{"too many stops", `{"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`, "stop", "invalid_value", "17 strings, at most 16"},
		{"stream a string", `{"prompt":"x","stream":"yes"}`, "stream", "invalid_type", "expected a boolean, but got a string"},
		{"stream_options without stream", `{"prompt":"x","stream_options":{"include_usage":true}}`, "stream_options", "invalid_value", "only allowed when 'stream' is true"},
		{"stream_options not an object", `{"prompt":"x","stream":true,"stream_options":true}`, "stream_options", "invalid_type", "expected an object, but got a boolean"},
		{"include_usage a number", `{"prompt":"x","stream":true,"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "invalid_type", "Invalid type for 'stream_options.include_usage': expected a boolean, but got an integer"},
		{"model a number", `{"prompt":"x","model":3}`, "model", "invalid_type", "expected a string"},
		{"user an object", `{"prompt":"x","user":{}}`, "user", "invalid_type", "but got an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r genRequest
			checkErr(t, decodeCompletion([]byte(tc.body), &r), tc)
		})
	}
}

func TestDecodeChat(t *testing.T) {
	var r genRequest
	body := `{"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","name":"ann","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		{"role":"assistant","content":"ok"}],"max_completion_tokens":7,"logprobs":false,"tools":[],"tool_choice":"none","response_format":{"type":"text"}}`
	if err := decodeChat([]byte(body), &r); err != nil {
		t.Fatalf("error: %s (%s)", err.Message, err.Param)
	}
	want := renderChat(nil, []chatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "a\nb"}, {Role: "assistant", Content: "ok"}})
	if !reflect.DeepEqual(r.Prompt, want) || r.MaxTokens != 7 || r.MaxTokensParam != "max_completion_tokens" || r.Model != "m" || r.Op != schema.OpChat {
		t.Errorf("got %+v", r)
	}
}

func TestDecodeChatErrors(t *testing.T) {
	for _, tc := range []errCase{
		{"missing messages", `{"model":"m"}`, "messages", "missing_required_parameter", "Missing required parameter: 'messages'."},
		{"messages an object", `{"messages":{}}`, "messages", "invalid_type", "expected an array of messages, but got an object"},
		{"no messages", `{"messages":[]}`, "messages", "invalid_value", "at least one message"},
		{"message a string", `{"messages":["hi"]}`, "messages[0]", "invalid_type", "Invalid type for 'messages[0]': expected an object, but got a string"},
		{"missing role", `{"messages":[{"content":"x"}]}`, "messages[0].role", "missing_required_parameter", "'messages[0].role'"},
		{"bad role", `{"messages":[{"role":"user","content":"x"},{"role":"robot","content":"x"}]}`, "messages[1].role", "invalid_value", `"robot" is not one of system, developer, user or assistant`},
		{"tool role without id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "missing_required_parameter", "'messages[0].tool_call_id'"},
		{"role a number", `{"messages":[{"role":1,"content":"x"}]}`, "messages[0].role", "invalid_type", "expected a string, but got an integer"},
		{"missing content", `{"messages":[{"role":"user"}]}`, "messages[0].content", "missing_required_parameter", "'messages[0].content'"},
		{"content a number", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", "invalid_type", "expected a string or an array of text parts, but got an integer"},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type", "unsupported_parameter", `only "text" parts`},
		{"part without text", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "missing_required_parameter", "'messages[0].content[0].text'"},
		{"tool_calls", `{"messages":[{"role":"assistant","content":"x","tool_calls":[{}]}]}`, "messages[0].tool_calls[0].function", "missing_required_parameter", "'messages[0].tool_calls[0].function'"},
		{"max_completion_tokens 0", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0}`, "max_completion_tokens", "invalid_value", ">= 1"},
		{"top_logprobs above 20", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs", "invalid_value", "expected a value in [0, 20], but got 21"},
		{"top_logprobs without logprobs", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, "top_logprobs", "invalid_value", "'logprobs' must be true"},
		{"logprobs a number", `{"messages":[{"role":"user","content":"x"}],"logprobs":1}`, "logprobs", "invalid_type", "expected a boolean"},
		{"tools", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, "tools[0].function", "missing_required_parameter", "'tools[0].function'"},
		{"functions", `{"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]}`, "functions", "unsupported_parameter", "deprecated function calling"},
		{"tool_choice required without tools", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice", "invalid_value", "needs tools"},
		{"response_format xml", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, "response_format.type", "invalid_value", `"text", "json_object" or "json_schema"`},
		{"schema keyword", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string","format":"email"}}}}`, "response_format.json_schema.schema", "invalid_value", "'format'"},
		{"n 3", `{"messages":[{"role":"user","content":"x"}],"n":3}`, "n", "unsupported_parameter", "got 3"},
		{"temperature a string", `{"messages":[{"role":"user","content":"x"}],"temperature":"0"}`, "temperature", "invalid_type", "expected a number, but got a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r genRequest
			checkErr(t, decodeChat([]byte(tc.body), &r), tc)
		})
	}
}

// checkDecoded asserts what holds for every request a decoder accepts.
func checkDecoded(t *testing.T, body []byte, r *genRequest) {
	if !json.Valid(body) {
		t.Fatalf("accepted invalid JSON %q", body)
	}
	if len(r.Prompt) == 0 {
		t.Fatalf("accepted %q with an empty prompt", body)
	}
	for _, tok := range r.Prompt {
		if tok < 0 || tok >= native.VocabSize {
			t.Fatalf("accepted %q with token %d outside the vocabulary", body, tok)
		}
	}
	if r.MaxTokens < 0 || r.Temperature < 0 || r.Temperature > 2 || r.TopP <= 0 || r.TopP > 1 || r.TopK < 0 || r.TopK > native.VocabSize {
		t.Fatalf("accepted %q with out-of-range parameters %+v", body, r)
	}
	if len(r.Stop) > maxStopStrings {
		t.Fatalf("accepted %d stop strings", len(r.Stop))
	}
	for _, s := range r.Stop {
		if s == "" || len(s) > maxStopBytes {
			t.Fatalf("accepted stop string %q", s)
		}
	}
	if (r.IncludeUsage || r.ContinuousUsage) && !r.Stream {
		t.Fatalf("accepted stream_options without stream")
	}
}

// checkRejected asserts the shape of every rejection.
func checkRejected(t *testing.T, body []byte, e *apiError) {
	if e.Status != 400 || e.Type != typeInvalidRequest || e.Message == "" || e.Kind != schema.ErrInvalidRequest {
		t.Fatalf("%q: rejection %+v is not a well-formed 400", body, e)
	}
	var obj struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(e.appendJSON(nil), &obj); err != nil || obj.Error.Message != e.Message {
		t.Fatalf("%q: error body %s does not decode: %v", body, e.appendJSON(nil), err)
	}
}

var fuzzSeeds = []string{
	`{"prompt":"hello","max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"prompt":[[256,1,2]],"stop":["\n","ab"],"temperature":0.7,"top_p":0.9,"top_k":5,"seed":42}`,
	`{"prompt":["x"],"n":1,"logprobs":null}`,
	`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"t"}]}],"max_completion_tokens":3}`,
	`{"messages":[{"role":"user","content":"hi"}],"stream":true,"return_token_ids":true}`,
	`{"prompt":"x","max_tokens":1e3}`,
	`{"prompt":"\ud800"}`,
	`[]`, `null`, `{"prompt":{}}`, `{"messages":[{}]}`, "\xff",
}

func FuzzDecodeCompletion(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r genRequest
		if e := decodeCompletion(body, &r); e != nil {
			checkRejected(t, body, e)
			return
		}
		checkDecoded(t, body, &r)
	})
}

func FuzzDecodeChat(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r genRequest
		if e := decodeChat(body, &r); e != nil {
			checkRejected(t, body, e)
			return
		}
		checkDecoded(t, body, &r)
		if r.Prompt[0] != native.TokBOS || r.Prompt[len(r.Prompt)-1] != native.TokAssistant {
			t.Fatalf("chat prompt %v does not follow the template", r.Prompt)
		}
	})
}
