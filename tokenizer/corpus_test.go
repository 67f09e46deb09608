package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// corpusSeeds are the hand-picked texts of each kind the oracle tests
// compare; corpus adds deterministic random mixtures of them.
var corpusSeeds = [][]string{
	{ // English and contractions
		"Hello world", "The quick brown fox jumps over the lazy dog.", "I'm sure they'll say it's fine, but we'd've known.",
		"DON'T SHOUT. I'M HERE. You're WELCOME", "she's", "'s 't 're 've 'm 'll 'd", "O'Neil's rock'n'roll", "can't won't shan't",
		"Mr. Smith (aged 42) said: \"no!\"", "e.g., i.e., etc.", " leading space", "trailing space ", "  two leading", "a  b   c    d",
		"Hello, World! How are you today?", "ALLCAPS lowercase MixedCase camelCase snake_case kebab-case",
	},
	{ // code
		"func main() {\n\tfmt.Println(\"hi\")\n}\n", "for (int i = 0; i < n; ++i) { a[i] += b[i] * 2; }", "def f(x):\n    return x**2  # square\n",
		"if x != nil && y >= 0 || !z {", "<div class=\"a\">&amp;</div>", "SELECT * FROM t WHERE id = 'x';", "x => x?.y ?? z", "#include <stdio.h>",
		"    indented\n        more\n\ttab\n", "a_b__c___d", "0x1F 0b1010 1e-9 3.14159", "$HOME/~user/.config/*.json", "```go\nx := 1\n```",
	},
	{ // digits and long numbers
		"0", "12", "123", "1234", "12345", "1234567890123456789012345678901234567890", "3.14159265358979", "1,000,000",
		"2026-11-23T18:54:35Z", "+1 (555) 010-9999", "٣٤٥ ७८९ ¹²³ ½ Ⅻ", "v1.2.3-rc.4", "99 bottles", "a1b2c3d4",
	},
	{ // whitespace runs
		" ", "  ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n ", "a \n b", "a\t\n\tb", "   \n\n   x", "x   ",
		"x \t ", "\n \n \n", "a\u00a0b", "a\u2003b\u3000c", "\v\f", "end\n", "  \r\n  ",
	},
	{ // CJK and other scripts
		"你好，世界！", "日本語のテキストです。", "한국어 텍스트", "中文 English 混合 text", "Привет, мир!", "Γειά σου Κόσμε",
		"مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Tiếng Việt có dấu",
	},
	{ // emoji and ZWJ sequences
		"😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷🇯🇵", "I ❤️ 🍕!", "🧑🏻‍💻 coding", "✨✨✨", "1️⃣ 2️⃣",
	},
	{ // combining marks and normalization
		"e\u0301", "café", "cafe\u0301", "n\u0303", "A\u030A", "Å", "\u0301alone", "ḁ̴̧͔̓", "Z̤͔ͧ̑a̜l̖g̑o", "ﬁ ligature", "Ｆｕｌｌ width",
	},
	{ // odd characters (JSON carries no invalid UTF-8: U+FFFD stands for it)
		"\x00", "\x01\x02\x1f", "\x7f", "\u0085", "\u0080\u009f", "\ufffd", "a\ufffdb", "\ufeffBOM", "\u200b\u200c\u200d",
		"\ue000 private", "\U0010fffd", "\uffff", "<0x41>", "▁", "▁▁x", "Ġ", "Ċ", "ĉ",
	},
	{ // special-token strings (the oracle matches added tokens in any text)
		"<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>", "<|im_start|>assistant\n",
		"<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<bos>", "<eos>", "<start_of_turn>model", "<end_of_turn>", "<pad>",
		"text<|eot_id|>more", "<<s>>", "<|im_end", "|im_end|>",
	},
}

// corpus returns at least n texts: every seed, then mixtures of 2..6 seed
// fragments joined by random separators.
func corpus(n int) []string {
	var out []string
	var all []string
	for _, k := range corpusSeeds {
		all = append(all, k...)
	}
	out = append(out, all...)
	rng := rand.New(rand.NewPCG(12, 34))
	seps := []string{"", " ", "  ", "\n", "\t", "\n\n", " \n", ".", ", "}
	for len(out) < n {
		var sb strings.Builder
		for j := 0; j < 2+rng.IntN(5); j++ {
			if j > 0 {
				sb.WriteString(seps[rng.IntN(len(seps))])
			}
			switch rng.IntN(6) {
			case 0: // a random number
				fmt.Fprintf(&sb, "%d", rng.Int64N(1<<uint(1+rng.IntN(62))))
			case 1: // a run of mixed whitespace
				for k := 0; k < 1+rng.IntN(6); k++ {
					sb.WriteByte(" \t\n\r"[rng.IntN(4)])
				}
			default:
				sb.WriteString(all[rng.IntN(len(all))])
			}
		}
		out = append(out, sb.String())
	}
	return out
}
