package tokenizer

import (
	"slices"
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
)

// The splitters against the pieces the regexes of tokenizer.json give
// (worked by hand from the regex; the oracle tests check them in bulk).
func TestSplitters(t *testing.T) {
	f := func(pre, text string, want ...string) {
		t.Helper()
		var got []string
		preTokenizers[pre].split(text, func(s, e int) { got = append(got, text[s:e]) })
		if !slices.Equal(got, want) {
			t.Errorf("%s %q: got %q, want %q", pre, text, got, want)
		}
	}
	f("llama-bpe", "Hello world", "Hello", " world")
	f("llama-bpe", "I'M here", "I", "'M", " here")
	f("llama-bpe", "12345", "123", "45")
	f("llama-bpe", "a  b", "a", " ", " b")
	f("llama-bpe", "x\n\n  y", "x", "\n\n", " ", " y")
	f("llama-bpe", "end  ", "end", "  ")
	f("llama-bpe", "(ok)!\n", "(ok", ")!\n")
	f("llama-bpe", " ...", " ...")
	f("llama-bpe", "\tx", "\tx")
	f("qwen2", "12345", "1", "2", "3", "4", "5")
	f("gpt2", "I'M here", "I", "'", "M", " here")
	f("gpt2", "it's 42", "it", "'s", " 42")
	f("gpt2", "a  b", "a", " ", " b")
	f("smollm", "a 12", "a", " ", "1", "2")
	f("smollm", "x  1", "x", "  ", "1")
	f("gpt-2", "it's 42", "it", "'s", " 42")
	f("qwen2", "e\u0301x !\u0301", "e", "\u0301x", " !\u0301")
	f("qwen35", "e\u0301x !\u0301", "e\u0301x", " !", "\u0301")
	f("refact", "a 12", "a", " ", "1", "2")
	f("deepseek-coder", "a 12 b", "a", " ", "1", "2", " b")
	f("deepseek-coder", "x 你好\ny", "x", " ", "你好", "\n", "y")
	f("deepseek-coder", "f(x);", "f", "(", "x", ");")
	f("deepseek-llm", "Hi  \n", "Hi", "  ", "\n")
	f("deepseek-llm", "ab\u3000cd", "ab", "\u3000cd")
	f("deepseek-llm", "x=12.5", "x", "=", "12", ".", "5")
	f("falcon", "x=1234", "x", "=", "123", "4")
	f("falcon", "a `b`", "a", " ", "`", "b", "`")
	f("default", "a 12345", "a", " ", "123", "45")
	f("default", "a `b`", "a", " `", "b", "`")
}

func TestEncodeRendered(t *testing.T) {
	tk := fuzzTokenizer(t)
	eot := tk.Vocab().EOT
	text := "hi<|eot|>x<|eot|>"
	all := tk.Encode(nil, text, true)
	if got := tk.EncodeRendered(nil, text, nil); !slices.Equal(got, all) {
		t.Errorf("no spans: %v, want %v", got, all)
	}
	// The first <|eot|> is inside a content span: text, not the token.
	spans := ContentSpans(text, []string{"hi<|eot|>x"})
	if !slices.Equal(spans, [][2]int{{0, 10}}) {
		t.Fatalf("spans %v", spans)
	}
	got := tk.EncodeRendered(nil, text, spans)
	n := 0
	for _, id := range got {
		if id == eot {
			n++
		}
	}
	if n != 1 || got[len(got)-1] != eot {
		t.Errorf("%v: want one <|eot|>, at the end", got)
	}
	if s := string(tk.Decode(nil, got)); s != text {
		t.Errorf("decode %q", s)
	}
	// Contents are found in order, trimmed when the template trims them.
	f := func(text string, contents []string, want [][2]int) {
		t.Helper()
		if got := ContentSpans(text, contents); !slices.Equal(got, want) {
			t.Errorf("ContentSpans(%q, %q) = %v, want %v", text, contents, got, want)
		}
	}
	f("<u>a<e><u>a<e>", []string{"a", "a"}, [][2]int{{3, 4}, {10, 11}})
	f("<u>x<e>", []string{"  x\n"}, [][2]int{{3, 4}})
	f("<u><e>", []string{"", "gone"}, nil)
}

// Without tokenizer.ggml.add_bos_token a file gets llama.cpp's default;
// with it, the key, except that Gemma 4 always adds BOS (as llama.cpp
// forces it).
func TestAddBOSDefault(t *testing.T) {
	f := func(model, pre string, key *bool, want bool) {
		t.Helper()
		v := &Vocab{Model: model, Pre: pre, Tokens: []string{"<s>", "a"}, Types: []int32{TypeControl, TypeNormal}, BOS: 0, EOS: -1, EOT: -1, EOM: -1, Pad: -1, Unk: -1}
		var kv []gguf.KV
		for _, x := range v.KV() {
			if x.Key != "tokenizer.ggml.add_bos_token" {
				kv = append(kv, x)
			}
		}
		if key != nil {
			kv = append(kv, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: *key})
		}
		b, err := (&gguf.File{KV: kv}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		g, err := native.ParseGGUF(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromGGUF(g)
		if err != nil {
			t.Fatal(err)
		}
		if got.AddBOS != want {
			t.Errorf("%s/%s key %v: AddBOS %v, want %v", model, pre, key, got.AddBOS, want)
		}
	}
	yes, no := true, false
	f("llama", "", nil, true)
	f("llama", "", &no, false)
	f("gpt2", "llama-bpe", nil, true)
	f("gpt2", "pixtral", nil, true)
	f("gpt2", "llama-bpe", &no, false)
	f("gpt2", "gpt-2", nil, false)
	f("gpt2", "qwen2", nil, false)
	f("gpt2", "qwen2", &yes, true)
	f("gemma4", "", nil, true)
	f("gemma4", "", &no, true)
}
