package tokenizer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// FromHF converts a Hugging Face tokenizer.json (and its
// tokenizer_config.json, which holds the chat template and the BOS/EOS
// names; nil when absent) into GGUF vocabulary metadata the way llama.cpp's
// convert_hf_to_gguf.py does: every id gets a token (missing ids become
// "[PADn]", unused), added tokens are control (special) or user-defined,
// SentencePiece's <0xXX> are byte tokens, merges are written "left right".
// Byte-level BPE becomes model "gpt2" with the pre-tokenizer recognised
// from its regex; a BPE over ▁-spaced characters with byte fallback
// becomes model "llama" with its merges (exact) and scores derived from
// them (the merge rank, for readers that only use scores).
func FromHF(tokenizerJSON, configJSON []byte) (*Vocab, error) {
	var tj struct {
		AddedTokens []struct {
			ID      int32  `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Normalizer    json.RawMessage `json:"normalizer"`
		PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
		PostProcessor json.RawMessage `json:"post_processor"`
		Decoder       json.RawMessage `json:"decoder"`
		Model         struct {
			Type        string           `json:"type"`
			Vocab       map[string]int32 `json:"vocab"`
			Merges      json.RawMessage  `json:"merges"`
			ByteFallbck bool             `json:"byte_fallback"`
			UnkToken    *string          `json:"unk_token"`
		} `json:"model"`
	}
	if err := json.Unmarshal(tokenizerJSON, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model.type %q: only BPE is supported", tj.Model.Type)
	}
	v := &Vocab{BOS: -1, EOS: -1, EOT: -1, EOM: -1, Pad: -1, Unk: -1}
	pre := string(tj.PreTokenizer)
	switch {
	case strings.Contains(pre, `"ByteLevel"`) || strings.Contains(string(tj.Decoder), `"ByteLevel"`):
		v.Model = "gpt2"
		p, err := hfPre(pre)
		if err != nil {
			return nil, err
		}
		v.Pre = p
	case tj.Model.ByteFallbck:
		v.Model = "llama"
		v.AddSpacePrefix = strings.Contains(string(tj.Normalizer), `"Prepend"`) ||
			strings.Contains(pre, `"prepend_scheme":"always"`)
	default:
		return nil, fmt.Errorf("tokenizer.json: neither byte-level BPE nor BPE with byte_fallback")
	}

	n := int32(0)
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n <= 0 || n > 1<<24 {
		return nil, fmt.Errorf("tokenizer.json: %d tokens", n)
	}
	v.Tokens = make([]string, n)
	v.Types = make([]int32, n)
	for i := range v.Tokens {
		v.Tokens[i] = fmt.Sprintf("[PAD%d]", i)
		v.Types[i] = TypeUnused
	}
	for text, id := range tj.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer.json: token %q has id %d", text, id)
		}
		v.Tokens[id] = text
		v.Types[id] = TypeNormal
		if v.Model == "llama" && len(text) == 6 && strings.HasPrefix(text, "<0x") && text[5] == '>' {
			v.Types[id] = TypeByte
		}
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("tokenizer.json: added token %q has id %d", a.Content, a.ID)
		}
		v.Tokens[a.ID] = a.Content
		v.Types[a.ID] = TypeUserDefined
		if a.Special {
			v.Types[a.ID] = TypeControl
		}
	}
	id := func(text string) int32 {
		for _, a := range tj.AddedTokens {
			if a.Content == text {
				return a.ID
			}
		}
		if i, ok := tj.Model.Vocab[text]; ok {
			return i
		}
		return -1
	}
	if tj.Model.UnkToken != nil {
		if v.Unk = id(*tj.Model.UnkToken); v.Unk >= 0 {
			v.Types[v.Unk] = TypeUnknown
		}
	}

	// Merges: ["a b", …] or [["a", "b"], …].
	var ms []string
	if err := json.Unmarshal(tj.Model.Merges, &ms); err != nil {
		var pairs [][2]string
		if err2 := json.Unmarshal(tj.Model.Merges, &pairs); err2 != nil {
			return nil, fmt.Errorf("tokenizer.json: model.merges: %w", err)
		}
		ms = make([]string, len(pairs))
		for i, p := range pairs {
			ms[i] = p[0] + " " + p[1]
		}
	}
	v.Merges = ms
	if v.Model == "llama" {
		// score = -(rank+1) of the first merge making the token, 0 for
		// tokens no merge makes (single characters, specials).
		v.Scores = make([]float32, n)
		seen := make([]bool, n)
		for r, m := range ms {
			if i := strings.IndexByte(m, ' '); i >= 0 {
				if t, ok := tj.Model.Vocab[m[:i]+m[i+1:]]; ok && !seen[t] {
					seen[t] = true
					v.Scores[t] = -float32(r + 1)
				}
			}
		}
	}

	// tokenizer_config.json: special token names, add_bos/eos, chat template.
	var cfg map[string]json.RawMessage
	if configJSON != nil {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	name := func(key string) string {
		raw, ok := cfg[key]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var obj struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(raw, &obj) == nil {
			return obj.Content
		}
		return ""
	}
	v.BOS = id(name("bos_token"))
	v.EOS = id(name("eos_token"))
	v.Pad = id(name("pad_token"))
	if u := name("unk_token"); u != "" {
		v.Unk = id(u)
	}
	for _, t := range []string{"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "<eot>"} {
		if i := id(t); i >= 0 {
			v.EOT = i
			break
		}
	}
	v.EOM = id("<|eom_id|>")
	if raw, ok := cfg["add_bos_token"]; ok {
		_ = json.Unmarshal(raw, &v.AddBOS)
	} else if v.BOS >= 0 {
		// the post-processor's template starts with BOS
		v.AddBOS = strings.Contains(string(tj.PostProcessor), `"single":[{"SpecialToken":{"id":`+quote(v.Tokens[v.BOS]))
	}
	if raw, ok := cfg["add_eos_token"]; ok {
		_ = json.Unmarshal(raw, &v.AddEOS)
	}
	if raw, ok := cfg["chat_template"]; ok {
		if json.Unmarshal(raw, &v.ChatTemplate) != nil {
			// a list of named templates: take "default"
			var named []struct{ Name, Template string }
			_ = json.Unmarshal(raw, &named)
			for _, t := range named {
				if t.Name == "default" {
					v.ChatTemplate = t.Template
				}
			}
		}
	}
	return v, nil
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// The pre-tokenizer regexes of tokenizer.json that picometer implements,
// by llama.cpp's tokenizer.ggml.pre name.
var hfPreRegex = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      "qwen2",
}

// hfPre names the pre-tokenizer of a byte-level tokenizer.json.
func hfPre(raw string) (string, error) {
	var p struct {
		Type          string `json:"type"`
		UseRegex      bool   `json:"use_regex"`
		Individual    bool   `json:"individual_digits"`
		Pretokenizers []struct {
			Type       string `json:"type"`
			UseRegex   bool   `json:"use_regex"`
			Individual bool   `json:"individual_digits"`
			Pattern    struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
		} `json:"pretokenizers"`
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return "", fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	if p.Type == "ByteLevel" && p.UseRegex {
		return "gpt-2", nil // llama.cpp's name (it does not know "gpt2")
	}
	var types []string
	for _, s := range p.Pretokenizers {
		types = append(types, s.Type)
		if s.Type == "Split" {
			if name, ok := hfPreRegex[s.Pattern.Regex]; ok {
				return name, nil
			}
			return "", fmt.Errorf("tokenizer.json: pre-tokenizer regex %q is not one picometer implements", s.Pattern.Regex)
		}
	}
	if len(p.Pretokenizers) == 2 && p.Pretokenizers[0].Type == "Digits" && p.Pretokenizers[0].Individual &&
		p.Pretokenizers[1].Type == "ByteLevel" && p.Pretokenizers[1].UseRegex {
		return "smollm", nil
	}
	sort.Strings(types)
	return "", fmt.Errorf("tokenizer.json: pre-tokenizer %s %v is not one picometer implements", p.Type, types)
}
