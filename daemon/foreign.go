package daemon

// This file is the list of other servers' sampling and constraint fields
// (vLLM, llama.cpp, TGI, Ollama, SGLang) that picometer does not honour:
// each is a 400 naming it, never silently ignored. A field sent with its
// server's default value (the value that changes nothing) is accepted.
// Fields picometer honours are read where their meaning lives
// (openai.go: top_k, repetition_penalty, seed, stop, return_token_ids;
// constraint.go: min_p, guided_json, guided_regex, guided_choice,
// guided_grammar, structured_outputs, grammar, json_schema, regex, format;
// tools.go: tools, tool_choice, parallel_tool_calls); honouredFields lists
// them so the test can tell the two lists apart and cover both.

// foreignField is a field another server reads and picometer refuses.
type foreignField struct {
	name     string
	servers  string   // who reads it
	defaults []string // JSON values that change nothing, accepted
}

// foreignFields are refused by name (unless sent with a default value).
var foreignFields = []foreignField{
	// vLLM
	{"use_beam_search", "vLLM", []string{"false"}},
	{"length_penalty", "vLLM", []string{"1", "1.0"}},
	{"min_tokens", "vLLM", []string{"0"}},
	{"ignore_eos", "vLLM, llama.cpp, SGLang", []string{"false"}},
	{"stop_token_ids", "vLLM, SGLang", []string{"[]"}},
	{"include_stop_str_in_output", "vLLM", []string{"false"}},
	{"skip_special_tokens", "vLLM, SGLang", []string{"true"}},
	{"spaces_between_special_tokens", "vLLM, SGLang", []string{"true"}},
	{"truncate_prompt_tokens", "vLLM", nil},
	{"prompt_logprobs", "vLLM", nil},
	{"allowed_token_ids", "vLLM", nil},
	{"bad_words", "vLLM", []string{"[]"}},
	{"logits_processors", "vLLM", []string{"[]"}},
	{"guided_decoding_backend", "vLLM", nil},
	{"guided_whitespace_pattern", "vLLM", nil},
	{"min_new_tokens", "SGLang", []string{"0"}},
	{"no_stop_trim", "SGLang", []string{"false"}},
	{"ebnf", "SGLang", nil},
	// llama.cpp
	{"n_predict", "llama.cpp", []string{"-1"}},
	{"typical_p", "llama.cpp, TGI", []string{"1", "1.0"}},
	{"tfs_z", "llama.cpp, Ollama", []string{"1", "1.0"}},
	{"mirostat", "llama.cpp, Ollama", []string{"0"}},
	{"mirostat_tau", "llama.cpp, Ollama", nil},
	{"mirostat_eta", "llama.cpp, Ollama", nil},
	{"dynatemp_range", "llama.cpp", []string{"0", "0.0"}},
	{"dynatemp_exponent", "llama.cpp", []string{"1", "1.0"}},
	{"xtc_probability", "llama.cpp", []string{"0", "0.0"}},
	{"xtc_threshold", "llama.cpp", nil},
	{"dry_multiplier", "llama.cpp", []string{"0", "0.0"}},
	{"dry_base", "llama.cpp", nil},
	{"dry_allowed_length", "llama.cpp", nil},
	{"dry_penalty_last_n", "llama.cpp", nil},
	{"dry_sequence_breakers", "llama.cpp", nil},
	{"repeat_last_n", "llama.cpp, Ollama", nil},
	{"repeat_penalty", "llama.cpp, Ollama", []string{"1", "1.0"}},
	{"penalize_nl", "llama.cpp, Ollama", []string{"false"}},
	{"penalty_last_n", "llama.cpp", nil},
	{"n_probs", "llama.cpp", []string{"0"}},
	{"min_keep", "llama.cpp", []string{"0"}},
	{"samplers", "llama.cpp", nil},
	{"top_n_sigma", "llama.cpp", []string{"-1"}},
	{"n_keep", "llama.cpp", []string{"0"}},
	// TGI
	{"do_sample", "TGI", nil},
	{"watermark", "TGI", []string{"false"}},
	{"top_n_tokens", "TGI", nil},
	{"decoder_input_details", "TGI", []string{"false"}},
	{"truncate", "TGI", nil},
	// Ollama
	{"options", "Ollama", []string{"{}"}},
	{"num_predict", "Ollama", nil},
	{"num_ctx", "Ollama", nil},
}

// honouredFields are other servers' sampling and constraint fields that
// picometer reads and enforces.
var honouredFields = []string{
	"top_k", "min_p", "repetition_penalty", "seed", "stop", "return_token_ids",
	"guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs",
	"grammar", "json_schema", "regex", "format",
}

// refuseForeign refuses the first foreign field the request sets to
// anything but a default.
func (d *decoder) refuseForeign() *apiError {
	for _, f := range foreignFields {
		raw, ok := d.get(f.name)
		if !ok {
			continue
		}
		def := false
		for _, v := range f.defaults {
			def = def || string(raw) == v
		}
		if !def {
			return badRequest(f.name, "unsupported_parameter", "Unsupported parameter '%s' (%s): this server does not implement it.", f.name, f.servers)
		}
	}
	return nil
}
