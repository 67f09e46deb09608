package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers that are a sequence of regexes (DeepSeek, Falcon and
// llama.cpp's "default"): each regex cuts every piece the previous one
// left into its matches and the text between them, all of which are
// pieces (Hugging Face's Split with behavior "Isolated"; llama.cpp's
// unicode_regex_split runs the same sequence). A stage sees one piece, so
// its anchors and look-aheads end at the piece's end.

// chain runs stages in order. Each stage's pieces are kept as their end
// offsets in two buffers from a pool, so a split allocates only its one
// collecting closure, not one per piece.
func chain(stages ...splitter) splitter {
	return func(t string, yield func(int, int)) {
		w := chainPool.Get().(*chainWork)
		ends, next := append(w.a[:0], len(t)), w.b[:0]
		base := 0
		add := func(_, e int) { next = append(next, base+e) }
		for _, st := range stages {
			next, base = next[:0], 0
			for _, e := range ends {
				st(t[base:e], add)
				base = e
			}
			ends, next = next, ends
		}
		start := 0
		for _, e := range ends {
			yield(start, e)
			start = e
		}
		w.a, w.b = ends, next
		chainPool.Put(w)
	}
}

type chainWork struct{ a, b []int }

var chainPool = sync.Pool{New: func() any { return new(chainWork) }}

// A matcher is one regex anchored at i: it returns the end of its match
// (i when it does not match there). Every matcher here fails in constant
// time, so isolating one is linear in the text.
type matcher func(t string, i int) int

// isolate cuts t into the leftmost matches of m and the text between them.
func isolate(m matcher) splitter {
	return func(t string, yield func(int, int)) {
		gap := 0
		for i := 0; i < len(t); {
			if e := m(t, i); e > i {
				if gap < i {
					yield(gap, i)
				}
				yield(i, e)
				i, gap = e, e
				continue
			}
			_, n := at(t, i)
			i += n
		}
		if gap < len(t) {
			yield(gap, len(t))
		}
	}
}

// run matches one or more runes in class.
func run(class func(rune) bool) matcher {
	return func(t string, i int) int {
		for {
			r, n := at(t, i)
			if n == 0 || !class(r) {
				return i
			}
			i += n
		}
	}
}

// one matches a single rune in class.
func one(class func(rune) bool) matcher {
	return func(t string, i int) int {
		if r, n := at(t, i); n > 0 && class(r) {
			return i + n
		}
		return i
	}
}

// spaceThen matches \s?X+ where X is class.
func spaceThen(class func(rune) bool) matcher {
	m := run(class)
	return func(t string, i int) int {
		if r, n := at(t, i); n > 0 && isS(r) {
			if e := m(t, i+n); e > i+n {
				return e
			}
			return i // \s? empty leaves a space that X cannot start with
		}
		return m(t, i)
	}
}

// trailingSpace is \s+$: the piece's final run of white space.
func trailingSpace(t string, yield func(int, int)) {
	j := len(t)
	for j > 0 {
		r, n := utf8.DecodeLastRuneInString(t[:j])
		if !isS(r) {
			break
		}
		j -= n
	}
	if j > 0 && j < len(t) {
		yield(0, j)
		yield(j, len(t))
		return
	}
	yield(0, len(t))
}

// gpt2Stage is the GPT-2 regex as a stage.
func gpt2Stage(t string, yield func(int, int)) { gpt2(t, 0, yield) }

// Character classes of these regexes, as llama.cpp and Hugging Face read
// them. \p{P} is Unicode punctuation.
func isP(r rune) bool {
	if r < utf8.RuneSelf {
		return r > ' ' && r < 0x7f && !isL(r) && !isN(r) && !isASCIISymbol(r)
	}
	return unicode.IsPunct(r)
}

// isASCIISymbol is \p{S} below 128: $+<=>^`|~.
func isASCIISymbol(r rune) bool {
	switch r {
	case '$', '+', '<', '=', '>', '^', '`', '|', '~':
		return true
	}
	return false
}

func isNewline1(r rune) bool   { return r == '\r' || r == '\n' }
func isASCIIDigit(r rune) bool { return r >= '0' && r <= '9' }

// isCJK is [一-龥ࠀ-一가-퟿] (U+0800–U+9FA5 and U+AC00–U+D7FF) of the
// DeepSeek regexes; white space in those blocks (U+3000 and the like) is
// not matched, as the regex engines both read it as \s only.
func isCJK(r rune) bool {
	return (r >= 0x0800 && r <= 0x9FA5 || r >= 0xAC00 && r <= 0xD7FF) && !unicode.IsSpace(r)
}

// digits3 is [0-9][0-9][0-9].
func digits3(t string, i int) int {
	if i+3 <= len(t) && isASCIIDigit(rune(t[i])) && isASCIIDigit(rune(t[i+1])) && isASCIIDigit(rune(t[i+2])) {
		return i + 3
	}
	return i
}

// DeepSeek LLM: [\r\n], then \s? before a run of its cased letters (the
// ranges its tokenizer.json lists, below), then \s? before ASCII and
// full-width punctuation (the ranges !-/ :-~ ！-／ ：-～ ‘-‟ 、-。, which
// include the ASCII letters), then trailing white space, then CJK runs,
// then runs of \p{N}.
var deepseekLetters = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x0041, 0x005A, 1}, {0x0061, 0x007A, 1}, {0x00B5, 0x00B5, 1}, {0x00C0, 0x00D6, 1},
		{0x00D8, 0x00F6, 1}, {0x00F8, 0x01BA, 1}, {0x01BC, 0x01BF, 1}, {0x01C4, 0x0293, 1},
		{0x0295, 0x02AF, 1}, {0x0370, 0x0373, 1}, {0x0376, 0x0377, 1}, {0x037B, 0x037D, 1},
		{0x037F, 0x037F, 1}, {0x0386, 0x0386, 1}, {0x0388, 0x038A, 1}, {0x038C, 0x038C, 1},
		{0x038E, 0x03A1, 1}, {0x03A3, 0x03F5, 1}, {0x03F7, 0x0481, 1}, {0x048A, 0x052F, 1},
		{0x0531, 0x0556, 1}, {0x10A0, 0x10C5, 1}, {0x13A0, 0x13F5, 1}, {0x13F8, 0x13FD, 1},
		{0x1C90, 0x1CBA, 1}, {0x1CBD, 0x1CBF, 1}, {0x1D00, 0x1D2B, 1}, {0x1D6B, 0x1D77, 1},
		{0x1D79, 0x1D9A, 1}, {0x1E00, 0x1F15, 1}, {0x1F18, 0x1F1D, 1}, {0x1F20, 0x1F45, 1},
		{0x1F48, 0x1F4D, 1}, {0x1F50, 0x1F57, 1}, {0x1F59, 0x1F59, 1}, {0x1F5B, 0x1F5B, 1},
		{0x1F5D, 0x1F5D, 1}, {0x1F5F, 0x1F7D, 1}, {0x1F80, 0x1FB4, 1}, {0x1FB6, 0x1FBC, 1},
		{0x1FBE, 0x1FBE, 1}, {0x1FC2, 0x1FC4, 1}, {0x1FC6, 0x1FCC, 1}, {0x1FD0, 0x1FD3, 1},
		{0x1FD6, 0x1FDB, 1}, {0x1FE0, 0x1FEC, 1}, {0x1FF2, 0x1FF4, 1}, {0x1FF6, 0x1FFC, 1},
		{0x2102, 0x2102, 1}, {0x2107, 0x2107, 1}, {0x210A, 0x2113, 1}, {0x2115, 0x2115, 1},
		{0x2119, 0x211D, 1}, {0x2124, 0x2124, 1}, {0x2126, 0x2126, 1}, {0x2128, 0x2128, 1},
		{0x212A, 0x212D, 1}, {0x212F, 0x2134, 1}, {0x2139, 0x2139, 1}, {0x213C, 0x213F, 1},
		{0x2145, 0x2149, 1}, {0x214E, 0x214E, 1}, {0x2183, 0x2184, 1}, {0x2C00, 0x2C7B, 1},
		{0x2C7E, 0x2CE4, 1}, {0x2CEB, 0x2CEE, 1}, {0x2CF2, 0x2CF3, 1}, {0xA640, 0xA66D, 1},
		{0xA680, 0xA69B, 1}, {0xA722, 0xA76F, 1}, {0xA771, 0xA787, 1}, {0xA78B, 0xA78E, 1},
		{0xAB70, 0xABBF, 1}, {0xFB00, 0xFB06, 1}, {0xFB13, 0xFB17, 1}, {0xFF21, 0xFF3A, 1},
		{0xFF41, 0xFF5A, 1},
	},
	R32: []unicode.Range32{
		{0x10400, 0x1044F, 1}, {0x104B0, 0x104D3, 1}, {0x104D8, 0x104FB, 1}, {0x10C80, 0x10CB2, 1},
		{0x10CC0, 0x10CF2, 1}, {0x118A0, 0x118DF, 1}, {0x1E900, 0x1E943, 1},
	},
	LatinOffset: 5,
}

func isDeepseekLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return r|0x20 >= 'a' && r|0x20 <= 'z'
	}
	return unicode.Is(deepseekLetters, r)
}

func isDeepseekPunct(r rune) bool {
	return r >= '!' && r <= '/' || r >= ':' && r <= '~' || r >= 0xFF01 && r <= 0xFF0F || r >= 0xFF1A && r <= 0xFF5E ||
		r >= 0x2018 && r <= 0x201F || r == 0x3001 || r == 0x3002 // U+3000 is white space, never this class
}

var splitDeepseekLLM = chain(
	isolate(one(isNewline1)),
	isolate(spaceThen(isDeepseekLetter)),
	isolate(spaceThen(isDeepseekPunct)),
	trailingSpace,
	isolate(run(isCJK)),
	isolate(run(isN)),
)

// DeepSeek Coder: [\r\n], \s?\p{L}+, \s?\p{P}+, CJK runs, each \p{N}.
var splitDeepseekCoder = chain(
	isolate(one(isNewline1)),
	isolate(spaceThen(isL)),
	isolate(spaceThen(isP)),
	isolate(run(isCJK)),
	isolate(one(isN)),
)

// Falcon: runs of punctuation and the ASCII symbols $+<=>^~|`, then the
// GPT-2 regex, then ASCII digits in threes. llama.cpp's "default" (a
// missing or "default" tokenizer.ggml.pre on a gpt2 model) is the same
// without the backtick and with runs of \p{N} before the threes.
var splitFalcon = chain(
	isolate(run(func(r rune) bool { return isP(r) || isASCIISymbol(r) })),
	gpt2Stage,
	isolate(digits3),
)

var splitDefault = chain(
	isolate(run(func(r rune) bool { return isP(r) || isASCIISymbol(r) && r != '`' })),
	gpt2Stage,
	isolate(run(isN)),
	isolate(digits3),
)
