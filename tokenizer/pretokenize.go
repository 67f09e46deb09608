package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// A splitter is a pre-tokenizer: it cuts a text into the pieces BPE merges
// within (never across). Each is a hand-written matcher for one regular
// expression of a Hugging Face tokenizer.json (llama.cpp keeps the same
// regexes in llama-vocab.cpp), so no regex engine runs and nothing is
// allocated: split calls yield with the byte offsets of each piece, in order,
// covering the whole text.
type splitter func(text string, yield func(start, end int))

// preTokenizer is what a tokenizer.ggml.pre name selects.
type preTokenizer struct {
	split        splitter
	nfc          bool // normalize to NFC first (Qwen2's tokenizer.json)
	ignoreMerges bool // a piece that is a whole token is that token (llama.cpp's ignore_merges)
	addBOS       bool // add BOS when the file has no tokenizer.ggml.add_bos_token (llama.cpp's default)
}

// The pre-tokenizers by tokenizer.ggml.pre: every name llama.cpp's
// llama-vocab.cpp accepts for a regex picometer implements, with the same
// ignore_merges. Names llama.cpp gives more behaviour than the split (an
// extra separator token, a dropped BOS) are left out until that is done.
var preTokenizers = func() map[string]preTokenizer {
	m := map[string]preTokenizer{}
	add := func(p preTokenizer, names ...string) {
		for _, n := range names {
			m[n] = p
		}
	}
	// Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
	// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	llama3 := func(t string, y func(int, int)) { splitLlama3(t, 3, false, y) }
	add(preTokenizer{split: llama3, ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	add(preTokenizer{split: llama3}, "dbrx", "smaug-bpe")
	// Qwen2/Qwen3: the Llama 3 regex with single digits (\p{N}). NFC is
	// Qwen's tokenizer.json normalizer (llama.cpp does not normalize).
	qwen2 := func(t string, y func(int, int)) { splitLlama3(t, 1, false, y) }
	add(preTokenizer{split: qwen2, nfc: true}, "qwen2", "deepseek-r1-qwen")
	add(preTokenizer{split: qwen2}, "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open")
	// Qwen3.5: the Qwen2 regex with marks as letters: [\p{L}\p{M}]+ and
	//  ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*.
	add(preTokenizer{split: func(t string, y func(int, int)) { splitLlama3(t, 1, true, y) }}, "qwen35")
	// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	// ("gpt2" is what picometer's converter wrote before it wrote "gpt-2").
	gpt2 := func(t string, y func(int, int)) { splitGPT2(t, false, y) }
	add(preTokenizer{split: gpt2}, "gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
		"a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4")
	// StarCoder: every digit alone (\p{N}), then the GPT-2 regex.
	add(preTokenizer{split: func(t string, y func(int, int)) { splitGPT2(t, true, y) }},
		"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2")
	add(preTokenizer{split: splitFalcon}, "falcon")
	add(preTokenizer{split: splitDefault}, "default")
	add(preTokenizer{split: splitDeepseekLLM}, "deepseek-llm")
	add(preTokenizer{split: splitDeepseekCoder}, "deepseek-coder")
	return m
}()

// Character classes, as Oniguruma (the Rust tokenizers' regex engine) reads
// \p{L}, \p{N} and \s.
func isL(r rune) bool {
	return r < utf8.RuneSelf && (r|0x20 >= 'a' && r|0x20 <= 'z') || r >= utf8.RuneSelf && unicode.IsLetter(r)
}
func isN(r rune) bool { return r >= '0' && r <= '9' || r >= utf8.RuneSelf && unicode.IsNumber(r) }
func isS(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return unicode.IsSpace(r)
}
func isNL(r rune) bool { return r == '\r' || r == '\n' }

// at returns the rune at byte offset i and its size (0 at the end).
func at(t string, i int) (rune, int) {
	if i >= len(t) {
		return -1, 0
	}
	if c := t[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(t[i:])
}

// contraction returns the length of 's 't 're 've 'm 'll 'd at i (0 if
// none); fold makes it case-insensitive.
func contraction(t string, i int, fold bool) int {
	if i+1 >= len(t) || t[i] != '\'' {
		return 0
	}
	lower := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 32
		}
		return c
	}
	switch lower(t[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(t) && lower(t[i+2]) == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(t) && lower(t[i+2]) == 'l' {
			return 3
		}
	}
	return 0
}

// spaceRun matches whitespace from i: \s*[\r\n]+ (ending at the run's last
// newline) when the run has a newline and nl is set, else \s+(?!\S), else
// \s+. It returns the end (i when t[i] is not whitespace).
func spaceRun(t string, i int, nl bool) int {
	j, lastNL := i, -1
	var last int // size of the run's last rune
	for {
		r, n := at(t, j)
		if n == 0 || !isS(r) {
			break
		}
		if isNL(r) {
			lastNL = j + n
		}
		j += n
		last = n
	}
	switch {
	case j == i:
		return i
	case nl && lastNL >= 0:
		return lastNL
	case j == len(t) || j-last == i:
		return j // \s+(?!\S) at the end, or a single space before \S (\s+)
	default:
		return j - last // \s+(?!\S): leave the last space to the next piece
	}
}

func splitLlama3(t string, maxDigits int, marks bool, yield func(int, int)) {
	for i := 0; i < len(t); {
		start := i
		r, n := at(t, i)
		switch {
		case r == '\'' && contraction(t, i, true) > 0:
			i += contraction(t, i, true)
		case isL(r) || marks && isMark(r):
			i = letters(t, i+n, marks)
		case isN(r):
			i += n
			for d := 1; d < maxDigits; d++ {
				r2, n2 := at(t, i)
				if n2 == 0 || !isN(r2) {
					break
				}
				i += n2
			}
		case !isNL(r) && !isS(r) && isLetterAt(t, i+n, marks):
			// [^\r\n\p{L}\p{N}]?\p{L}+ with a leading punctuation mark
			i = letters(t, i+n, marks)
		case r == ' ' && isPunctAt(t, i+n, marks), !isS(r):
			//  ?[^\s\p{L}\p{N}]+[\r\n]*
			if r == ' ' {
				i += n
			}
			i = punct(t, i, marks)
			for i < len(t) && (t[i] == '\r' || t[i] == '\n') {
				i++
			}
		default:
			// [^\r\n\p{L}\p{N}]?\p{L}+ with a leading non-newline space
			if !isNL(r) && isLetterAt(t, i+n, marks) {
				i = letters(t, i+n, marks)
				break
			}
			i = spaceRun(t, i, true)
		}
		yield(start, i)
	}
}

func splitGPT2(t string, digitsAlone bool, yield func(int, int)) {
	if !digitsAlone {
		gpt2(t, 0, yield)
		return
	}
	// Digits(individual_digits) first, then the GPT-2 regex on what is
	// between the digits.
	seg := 0
	for i := 0; i < len(t); {
		r, n := at(t, i)
		if !isN(r) {
			i += n
			continue
		}
		if seg < i {
			gpt2(t[seg:i], seg, yield)
		}
		yield(i, i+n)
		i += n
		seg = i
	}
	if seg < len(t) {
		gpt2(t[seg:], seg, yield)
	}
}

// gpt2 splits t by the GPT-2 regex, yielding offsets plus off.
func gpt2(t string, off int, yield func(int, int)) {
	for i := 0; i < len(t); {
		start := i
		r, _ := at(t, i)
		sp := 0
		if r == ' ' {
			sp = 1
		}
		r2, n2 := at(t, i+sp)
		switch {
		case r == '\'' && contraction(t, i, false) > 0:
			i += contraction(t, i, false)
		case n2 > 0 && isL(r2):
			i = letters(t, i+sp+n2, false)
		case n2 > 0 && isN(r2):
			i += sp + n2
			for {
				r3, n3 := at(t, i)
				if n3 == 0 || !isN(r3) {
					break
				}
				i += n3
			}
		case n2 > 0 && !isS(r2):
			i = punct(t, i+sp, false)
		default:
			i = spaceRun(t, i, false)
		}
		yield(off+start, off+i)
	}
}

// letters returns the end of the run of \p{L} (with marks, [\p{L}\p{M}])
// from i. (The mark test stays out of isL's way: Llama 3 and Qwen2 pay one
// predictable branch at the end of a run, nothing per letter.)
func letters(t string, i int, marks bool) int {
	for {
		r, n := at(t, i)
		if n == 0 || !isL(r) && !(marks && isMark(r)) {
			return i
		}
		i += n
	}
}

// punct returns the end of the run of [^\s\p{L}\p{N}] (with marks,
// [^\s\p{L}\p{M}\p{N}]) from i.
func punct(t string, i int, marks bool) int {
	for {
		r, n := at(t, i)
		if n == 0 || isS(r) || isL(r) || isN(r) || marks && isMark(r) {
			return i
		}
		i += n
	}
}

// isMark is \p{M} (Qwen3.5 counts marks as letters).
func isMark(r rune) bool { return r >= utf8.RuneSelf && unicode.IsMark(r) }

func isLetterAt(t string, i int, marks bool) bool {
	r, n := at(t, i)
	return n > 0 && (isL(r) || marks && isMark(r))
}

func isPunctAt(t string, i int, marks bool) bool {
	r, n := at(t, i)
	return n > 0 && !isS(r) && !isL(r) && !isN(r) && !(marks && isMark(r))
}
