package iree

import (
	"math"
	"math/bits"

	"github.com/picometer/picometer/native"
)

// This file: how the IREE engine chooses each output token from its
// logits, on the host. It follows the C engine's documented rules
// (native/sample.c's contract and native.Params) so a request means the
// same on either backend: the penalties first (repetition, then frequency
// and presence, in vLLM's order), then greedy (temperature 0: the first
// index of the largest logit) or one draw of the request's own
// xoshiro256** stream, seeded by splitmix64 from Params.Seed, from
// softmax(logits / temperature) cut to top_k and then top_p; logprobs are
// the log-softmax of the logits the token was drawn from (after the
// penalties and temperature, 1 when greedy; before top-k/top-p).

// rng is a xoshiro256** stream.
type rng [4]uint64

func newRNG(seed uint64) rng {
	var r rng
	for i := range r {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		r[i] = z ^ (z >> 31)
	}
	return r
}

func (s *rng) next() uint64 {
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// argmax returns the first index of the largest value (NaN never wins).
func argmax(l []float32) int {
	best := 0
	for i := 1; i < len(l); i++ {
		if l[i] > l[best] || (l[best] != l[best] && l[i] == l[i]) {
			best = i
		}
	}
	return best
}

// sampler holds the scratch of token choice, sized once for a vocabulary:
// choosing allocates nothing.
type sampler struct {
	pl  []float32 // penalized logits
	cnt []int32   // per-token counts of the output so far
	v   []float32 // candidates' values
	id  []int32   // candidates' ids
}

func newSampler(vocab int) *sampler {
	return &sampler{pl: make([]float32, vocab), cnt: make([]int32, vocab), v: make([]float32, vocab), id: make([]int32, vocab)}
}

// penalize returns logits after r's penalties (s.pl), or logits itself when
// r has none. seq is the prompt and the output so far, nPrompt long first.
func (s *sampler) penalize(p *native.Params, seq []int32, nPrompt int, logits []float32) []float32 {
	rep := p.RepetitionPenalty
	hasRep := rep != 0 && rep != 1
	if !hasRep && p.PresencePenalty == 0 && p.FrequencyPenalty == 0 {
		return logits
	}
	const done = 1 << 30
	l := s.pl
	copy(l, logits)
	for _, t := range seq[nPrompt:] {
		s.cnt[t]++
	}
	for _, t := range seq {
		c := s.cnt[t]
		if c&done != 0 {
			continue
		}
		s.cnt[t] = c | done
		if hasRep {
			if l[t] > 0 {
				l[t] /= rep
			} else {
				l[t] *= rep
			}
		}
		if c > 0 {
			l[t] -= float32(c)*p.FrequencyPenalty + p.PresencePenalty
		}
	}
	for _, t := range seq {
		s.cnt[t] = 0
	}
	return l
}

// better orders candidates: higher value first, then lower id.
func better(v []float32, id []int32, a, b int) bool {
	return v[a] > v[b] || (v[a] == v[b] && id[a] < id[b])
}

func sift(v []float32, id []int32, i, n int) {
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && better(v, id, c+1, c) {
			c++
		}
		if !better(v, id, c, i) {
			return
		}
		v[i], v[c] = v[c], v[i]
		id[i], id[c] = id[c], id[i]
		i = c
	}
}

// topSort moves the k best of v to the front, best first.
func topSort(v []float32, id []int32, k int) {
	n := len(v)
	for i := n/2 - 1; i >= 0; i-- {
		sift(v, id, i, n)
	}
	for i := 0; i < k; i++ {
		last := n - 1 - i
		v[0], v[last] = v[last], v[0]
		id[0], id[last] = id[last], id[0]
		sift(v, id, 0, last)
	}
	for i := 0; i < n/2; i++ {
		j := n - 1 - i
		v[i], v[j] = v[j], v[i]
		id[i], id[j] = id[j], id[i]
	}
}

// draw returns a token from logits (already penalized): the argmax when
// greedy, else one draw of r from the tempered, cut distribution.
func (s *sampler) draw(p *native.Params, r *rng, logits []float32) int32 {
	V := len(logits)
	if p.Temperature == 0 {
		return int32(argmax(logits))
	}
	u := float64(r.next()>>11) * 0x1.0p-53
	v, id := s.v[:V], s.id[:V]
	for i, l := range logits {
		v[i] = l / p.Temperature
		id[i] = int32(i)
	}
	n := V
	if p.TopK > 0 && p.TopK < V {
		n = p.TopK
	}
	nucleus := p.TopP > 0 && p.TopP < 1
	if n < V || nucleus {
		topSort(v, id, n)
	}
	mx := v[argmax(v[:n])]
	sum := 0.0
	for i := 0; i < n; i++ {
		v[i] = float32(math.Exp(float64(v[i] - mx)))
		sum += float64(v[i])
	}
	if nucleus {
		c := 0.0
		for i := 0; i < n; i++ {
			c += float64(v[i])
			if c >= float64(p.TopP)*sum {
				n, sum = i+1, c
				break
			}
		}
	}
	target, c := u*sum, 0.0
	for i := 0; i < n; i++ {
		c += float64(v[i])
		if target < c {
			return id[i]
		}
	}
	return id[n-1]
}

// logprobs returns tok's log-probability under logits / temperature (1
// when greedy) and writes the k most likely tokens' into ids/lps (most
// likely first, ties by lower id).
func logprobs(temperature float32, logits []float32, tok int32, k int, ids []int32, lps []float32) float32 {
	t := temperature
	if t <= 0 {
		t = 1
	}
	mx := logits[argmax(logits)] / t
	sum := 0.0
	n := 0
	for i, l := range logits {
		v := l / t
		sum += math.Exp(float64(v) - float64(mx))
		if k == 0 || (n == k && !(v > lps[n-1])) {
			continue
		}
		at := n
		if n < k {
			n++
		} else {
			at = k - 1
		}
		for at > 0 && v > lps[at-1] {
			lps[at], ids[at] = lps[at-1], ids[at-1]
			at--
		}
		lps[at], ids[at] = v, int32(i)
	}
	lse := float32(float64(mx) + math.Log(sum))
	for i := 0; i < n; i++ {
		lps[i] -= lse
	}
	return logits[tok]/t - lse
}
