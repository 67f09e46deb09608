package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and decodes ids to bytes. It is
// immutable after [New] and safe for concurrent use.
type Tokenizer struct {
	v    *Vocab
	kind int // kindBytes, kindBPE or kindSPM

	split        splitter // BPE pre-tokenizer
	nfc          bool     // normalize to NFC first (Qwen2's tokenizer.json)
	ignoreMerges bool     // a piece that is a whole token is that token (Llama 3)

	piece   [][]byte         // the bytes each token decodes to
	toID    map[string]int32 // BPE: raw bytes → normal token; SPM: token text → id
	byteTok [256]int32       // the token of each single byte (BPE) or <0xXX> (SPM); -1 if none
	ranks   ranker
	special *trie  // control, user-defined and unknown tokens
	user    *trie  // user-defined tokens: matched in any text, as llama.cpp and Hugging Face do
	isCtl   []bool // control tokens: decoded as "" when streaming to users
	cache   *wordCache

	spmWords bool  // SPM: no token has ▁ after another character
	space    int32 // SPM: the ▁ token (-1 if none)
	lines    bool  // SPM: BPE each run of newlines and each line apart (Gemma 4)
}

const (
	kindBytes = iota
	kindBPE
	kindSPM
)

// New builds the tokenizer v describes. An unknown model or pre-tokenizer
// is an error naming the value.
func New(v *Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: missing or empty")
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer.ggml.token_type: %d entries for %d tokens", len(v.Types), n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer.ggml.scores: %d entries for %d tokens", len(v.Scores), n)
	}
	t := &Tokenizer{v: v, piece: make([][]byte, n), isCtl: make([]bool, n), special: newTrie(), user: newTrie(), cache: newWordCache()}
	for i := range t.byteTok {
		t.byteTok[i] = -1
	}
	typ := func(id int) int32 {
		if v.Types == nil {
			return TypeNormal
		}
		return v.Types[id]
	}
	switch v.Model {
	case "picometer-bytes":
		t.kind = kindBytes
	case "gpt2":
		t.kind = kindBPE
		pre := v.Pre
		if pre == "" {
			pre = "default"
		}
		p, ok := preTokenizers[pre]
		if !ok {
			return nil, fmt.Errorf("tokenizer.ggml.pre: %q is not a known pre-tokenizer (want one of %s)", v.Pre, strings.Join(knownPre(), ", "))
		}
		t.split, t.nfc, t.ignoreMerges = p.split, p.nfc, p.ignoreMerges
	case "llama":
		t.kind = kindSPM
	case "gemma4":
		// SentencePiece-style BPE by merges (▁ for spaces, <0xXX> byte
		// fallback) over the runs of [^\n]+|\n+, as llama.cpp reads it.
		t.kind, t.lines = kindSPM, true
	default:
		return nil, fmt.Errorf("tokenizer.ggml.model: %q is not a known tokenizer model (want gpt2, llama, gemma4 or picometer-bytes)", v.Model)
	}
	t.toID = make(map[string]int32, n)
	for id, text := range v.Tokens {
		ty := typ(id)
		switch {
		case ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown:
			t.piece[id] = []byte(text)
			if t.kind == kindSPM && ty == TypeUserDefined {
				t.piece[id] = []byte(strings.ReplaceAll(text, "▁", " "))
			}
			t.isCtl[id] = ty == TypeControl
			t.special.add(text, int32(id))
			if ty == TypeUserDefined {
				t.user.add(text, int32(id))
			}
			if t.kind == kindBPE && ty == TypeUserDefined {
				continue
			}
		case t.kind == kindBPE:
			b, ok := unByteLevel(text)
			t.piece[id] = b
			if !ok {
				// Not in the byte-level alphabet (Command-R has "\u200d"
				// beside "âĢį"): no byte-level text spells it, so BPE never
				// makes it, as in llama.cpp; it still decodes to its text.
				continue
			}
			if len(b) == 1 && t.byteTok[b[0]] < 0 {
				t.byteTok[b[0]] = int32(id)
			}
			if _, dup := t.toID[string(b)]; !dup {
				t.toID[string(b)] = int32(id)
			}
			continue
		case ty == TypeByte || t.kind == kindBytes && id < 256:
			var b byte
			if _, err := fmt.Sscanf(text, "<0x%02X>", &b); err != nil || len(text) != 6 {
				return nil, fmt.Errorf("tokenizer.ggml.tokens[%d]: byte token %q is not <0xXX>", id, text)
			}
			t.piece[id] = []byte{b}
			if t.byteTok[b] < 0 {
				t.byteTok[b] = int32(id)
			}
			continue
		default:
			t.piece[id] = []byte(strings.ReplaceAll(text, "▁", " "))
		}
		if _, dup := t.toID[text]; !dup {
			t.toID[text] = int32(id)
		}
	}
	if t.kind == kindSPM {
		t.space, t.spmWords = -1, true
		if id, ok := t.toID["▁"]; ok {
			t.space = id
		}
		for id, text := range v.Tokens {
			if ty := typ(id); ty != TypeNormal && ty != TypeUserDefined {
				continue
			}
			if i := strings.Index(strings.TrimLeft(text, "▁"), "▁"); i >= 0 {
				t.spmWords = false
				break
			}
		}
		t.spmWords = t.spmWords && t.space >= 0
	}
	if t.kind == kindBPE && v.Merges == nil {
		return nil, fmt.Errorf("tokenizer.ggml.merges: missing (model gpt2 needs them)")
	}
	switch {
	case v.Merges != nil && t.kind != kindBytes:
		m := make(mergeTable, len(v.Merges))
		text := func(s string) (int32, bool) {
			if t.kind == kindBPE {
				b, _ := unByteLevel(s)
				id, ok := t.toID[string(b)]
				return id, ok
			}
			id, ok := t.toID[s]
			return id, ok
		}
		for rank, line := range v.Merges {
			// "left right"; a token may hold a space, so try each split.
			for i := 0; i < len(line); i++ {
				if line[i] != ' ' {
					continue
				}
				a, okA := text(line[:i])
				b, okB := text(line[i+1:])
				c, okC := text(line[:i] + line[i+1:])
				if okA && okB && okC {
					k := uint64(uint32(a))<<32 | uint64(uint32(b))
					if _, dup := m[k]; !dup {
						m[k] = uint64(rank)<<32 | uint64(uint32(c))
					}
					break
				}
			}
		}
		t.ranks = m
	case t.kind == kindSPM:
		t.ranks = newScoreRanker(t, v)
	}
	return t, nil
}

func knownPre() []string {
	var s []string
	for k := range preTokenizers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Vocab returns the vocabulary t was built from.
func (t *Tokenizer) Vocab() *Vocab { return t.v }

// Size is the number of tokens.
func (t *Tokenizer) Size() int { return len(t.piece) }

// scoreRanker is SentencePiece's BPE by scores (llama.cpp's
// llm_tokenizer_spm): a pair merges when its concatenation is a token, the
// higher the token's score the earlier.
type scoreRanker struct {
	t     *Tokenizer
	order []int32 // by id: position in descending score order
}

func newScoreRanker(t *Tokenizer, v *Vocab) *scoreRanker {
	ids := make([]int32, len(v.Tokens))
	for i := range ids {
		ids[i] = int32(i)
	}
	score := func(id int32) float32 {
		if v.Scores == nil {
			return 0
		}
		return v.Scores[id]
	}
	sort.SliceStable(ids, func(i, j int) bool { return score(ids[i]) > score(ids[j]) })
	r := &scoreRanker{t: t, order: make([]int32, len(ids))}
	for pos, id := range ids {
		r.order[id] = int32(pos)
	}
	return r
}

func (r *scoreRanker) rank(a, b int32) (int32, int32, bool) {
	var buf [128]byte
	s := append(append(buf[:0], r.t.v.Tokens[a]...), r.t.v.Tokens[b]...)
	id, ok := r.t.toID[string(s)]
	if !ok {
		return 0, 0, false
	}
	return r.order[id], id, true
}

// Encode appends the ids of text to dst. With special set, the texts of
// control and user-defined tokens in text are read as those tokens (use it
// for a rendered chat template, never for user content); without it they
// are ordinary text. BOS/EOS are not added: see [Tokenizer.AddBOS].
func (t *Tokenizer) Encode(dst []int32, text string, special bool) []int32 {
	if special {
		return t.EncodeRendered(dst, text, nil)
	}
	whole := [1][2]int{{0, len(text)}} // all of text is content: user-defined tokens only
	return t.EncodeRendered(dst, text, whole[:])
}

// encodeText encodes text with no special tokens in it: a whole text, or
// one between special tokens (SPM puts ▁ before each, as llama.cpp and
// Hugging Face's Prepend normalizer do).
func (t *Tokenizer) encodeText(dst []int32, text string) []int32 {
	if text == "" {
		return dst
	}
	switch t.kind {
	case kindSPM:
		if t.lines {
			return t.encodeLines(dst, text)
		}
		return t.encodeSPM(dst, text, t.v.AddSpacePrefix)
	case kindBytes: // one token per byte
		for i := 0; i < len(text); i++ {
			if id := t.byteTok[text[i]]; id >= 0 {
				dst = append(dst, id)
			} else if t.v.Unk >= 0 {
				dst = append(dst, t.v.Unk)
			}
		}
		return dst
	}
	if t.nfc && !norm.NFC.IsNormalString(text) {
		text = norm.NFC.String(text)
	}
	syms := make([]int32, 0, 32)
	t.split(text, func(s, e int) {
		w := text[s:e]
		if t.ignoreMerges {
			if id, ok := t.toID[w]; ok {
				dst = append(dst, id)
				return
			}
		}
		var hit bool
		if dst, hit = t.cache.get(dst, w); hit {
			return
		}
		n := len(dst)
		syms = syms[:0]
		for i := 0; i < len(w); i++ {
			if id := t.byteTok[w[i]]; id >= 0 {
				syms = append(syms, id)
			} else if t.v.Unk >= 0 {
				syms = append(syms, t.v.Unk) // a vocabulary without this byte
			}
		}
		if len(syms) > 0 {
			dst = bpe(dst, syms, t.ranks)
		}
		t.cache.put(w, dst[n:])
	})
	return dst
}

// encodeSPM is SentencePiece-style BPE over characters: spaces are ▁, a
// character not in the vocabulary falls back to its <0xXX> byte tokens
// (else the unknown token).
func (t *Tokenizer) encodeSPM(dst []int32, text string, prefix bool) []int32 {
	syms := make([]int32, 0, len(text)+1)
	if prefix {
		syms = t.spmChar(syms, "▁")
	}
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRuneInString(text[i:])
		if text[i] == ' ' {
			syms = t.spmChar(syms, "▁")
		} else {
			syms = t.spmChar(syms, text[i:i+n])
		}
		i += n
	}
	if !t.spmWords {
		return bpe(dst, syms, t.ranks)
	}
	// No token has ▁ after other characters, so no merge crosses the start
	// of a ▁ run: BPE each word alone (small heaps, same result).
	start := 0
	for i := 1; i < len(syms); i++ {
		if syms[i] == t.space && syms[i-1] != t.space {
			dst = bpe(dst, syms[start:i], t.ranks)
			start = i
		}
	}
	return bpe(dst, syms[start:], t.ranks)
}

// encodeLines is Gemma 4's split: each line and each run of newlines is
// encoded alone, a run of newlines that is a token as that token.
func (t *Tokenizer) encodeLines(dst []int32, text string) []int32 {
	prefix := t.v.AddSpacePrefix
	for i := 0; i < len(text); {
		j := i
		nl := text[i] == '\n'
		for j < len(text) && (text[j] == '\n') == nl {
			j++
		}
		if id, ok := t.toID[text[i:j]]; nl && ok {
			dst = append(dst, id)
		} else {
			dst = t.encodeSPM(dst, text[i:j], prefix)
		}
		i, prefix = j, false
	}
	return dst
}

func (t *Tokenizer) spmChar(syms []int32, c string) []int32 {
	if id, ok := t.toID[c]; ok {
		return append(syms, id)
	}
	for i := 0; i < len(c); i++ {
		if id := t.byteTok[c[i]]; id >= 0 {
			syms = append(syms, id)
		} else if t.v.Unk >= 0 {
			return append(syms, t.v.Unk)
		}
	}
	return syms
}

// EncodeRendered appends the ids of a rendered chat template: special
// tokens are matched in the template's own text but not inside plain, the
// byte spans [start, end) of text that hold message contents (sorted, not
// overlapping), so a user who writes "<|eot_id|>" gets the characters,
// not the token. The text between special tokens is encoded whole, so
// where no content holds a special token's text the ids are those of
// Encode(text, true), as Hugging Face's apply_chat_template gives.
func (t *Tokenizer) EncodeRendered(dst []int32, text string, plain [][2]int) []int32 {
	start, p := 0, 0
	for i := 0; i < len(text); {
		for p < len(plain) && plain[p][1] <= i {
			p++
		}
		tr, limit := t.special, len(text)
		if p < len(plain) {
			if plain[p][0] <= i {
				tr, limit = t.user, plain[p][1] // in a content: user-defined tokens only
			} else {
				limit = plain[p][0]
			}
		}
		id, n := tr.match(text[i:limit])
		if n == 0 {
			i++
			continue
		}
		dst = t.encodeText(dst, text[start:i])
		dst = append(dst, id)
		i += n
		start = i
	}
	return t.encodeText(dst, text[start:])
}

// ContentSpans finds the contents of a conversation in its rendered text,
// in order (each as written, else trimmed of surrounding white space, as
// templates often trim), for [Tokenizer.EncodeRendered]. A content the
// template rewrote beyond that is not found and gets no span.
func ContentSpans(text string, contents []string) [][2]int {
	var spans [][2]int
	pos := 0
	for _, c := range contents {
		for _, s := range []string{c, strings.TrimSpace(c)} {
			if s == "" {
				break
			}
			if i := strings.Index(text[pos:], s); i >= 0 {
				spans = append(spans, [2]int{pos + i, pos + i + len(s)})
				pos += i + len(s)
				break
			}
		}
	}
	return spans
}
