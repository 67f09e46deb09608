package tokenizer

import "sync"

// The BPE model: a word's symbols (initially bytes or characters, as ids)
// are merged pair by pair, always the pair of lowest rank first and, among
// equal ranks, the leftmost: Hugging Face's BPE (tokenizers' word.rs, a
// priority queue on (rank, position)) and llama.cpp's llm_tokenizer_bpe
// and llm_tokenizer_spm (scores) all reduce to this.

// ranker gives the rank of merging symbols a and b and the merged id; ok is
// false when the pair does not merge.
type ranker interface {
	rank(a, b int32) (rank int32, merged int32, ok bool)
}

// mergeTable is tokenizer.ggml.merges: rank = line number.
type mergeTable map[uint64]uint64 // a<<32|b → rank<<32|merged

func (m mergeTable) rank(a, b int32) (int32, int32, bool) {
	v, ok := m[uint64(uint32(a))<<32|uint64(uint32(b))]
	return int32(v >> 32), int32(uint32(v)), ok
}

// bpeWork is one word's merge state, reused through a pool.
type bpeWork struct {
	id         []int32 // symbol at each initial position (dead when merged away)
	prev, next []int32 // neighbours by position; -1 at the ends
	heap       []cand
}

type cand struct {
	rank, pos  int32
	left, rght int32 // ids the pair had when queued (stale check)
	merged     int32
}

func (c cand) less(d cand) bool { return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos }

var workPool = sync.Pool{New: func() any { return new(bpeWork) }}

// bpe merges the symbols syms in place and appends the resulting ids to dst.
func bpe(dst []int32, syms []int32, r ranker) []int32 {
	n := len(syms)
	if n == 1 {
		return append(dst, syms[0])
	}
	w := workPool.Get().(*bpeWork)
	w.id = append(w.id[:0], syms...)
	w.prev, w.next, w.heap = w.prev[:0], w.next[:0], w.heap[:0]
	for i := 0; i < n; i++ {
		w.prev = append(w.prev, int32(i-1))
		w.next = append(w.next, int32(i+1))
	}
	w.next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		w.push(r, int32(i), int32(i+1))
	}
	for len(w.heap) > 0 {
		c := w.pop()
		p := c.pos
		q := w.next[p]
		if w.id[p] != c.left || q < 0 || w.id[q] != c.rght {
			continue // stale: one side has merged since
		}
		w.id[p] = c.merged
		w.id[q] = -1
		nq := w.next[q]
		w.next[p] = nq
		if nq >= 0 {
			w.prev[nq] = p
			w.push(r, p, nq)
		}
		if pp := w.prev[p]; pp >= 0 {
			w.push(r, pp, p)
		}
	}
	for i := int32(0); i >= 0; i = w.next[i] {
		dst = append(dst, w.id[i])
	}
	workPool.Put(w)
	return dst
}

func (w *bpeWork) push(r ranker, p, q int32) {
	rank, merged, ok := r.rank(w.id[p], w.id[q])
	if !ok {
		return
	}
	c := cand{rank: rank, pos: p, left: w.id[p], rght: w.id[q], merged: merged}
	w.heap = append(w.heap, c)
	for i := len(w.heap) - 1; i > 0; {
		parent := (i - 1) / 2
		if !w.heap[i].less(w.heap[parent]) {
			break
		}
		w.heap[i], w.heap[parent] = w.heap[parent], w.heap[i]
		i = parent
	}
}

func (w *bpeWork) pop() cand {
	h := w.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h[l].less(h[m]) {
			m = l
		}
		if l+1 < len(h) && h[l+1].less(h[m]) {
			m = l + 1
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	w.heap = h
	return top
}
