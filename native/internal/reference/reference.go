// Package reference is a plain Go Llama-family forward pass (architectures
// llama, qwen2 and qwen3, as llama.cpp runs them): the numerical oracle
// the C engine is checked against. It favours being obviously correct over
// being fast (llama2.c's run.c, in float64): every activation is a float64,
// every weight is read from the float32 (or widened F16) tensors of a GGUF
// file as gguf parsed it.
//
// The model (the same conventions as native/model.h):
//
//	x = token_embd[tok]
//	for each layer:
//	    h = rmsnorm(x) * attn_norm
//	    q, k, v = Wq h + bq, Wk h + bk, Wv h + bv
//	                                      (GQA: n_kv_heads ≤ n_heads key/value heads of
//	                                       head_dim = key_length; biases: qwen2, optional in llama)
//	    q, k = rmsnorm(head) * q_norm, k_norm for each head   (qwen3 only)
//	    rope(q), rope(k) at position pos  (pair i of each head turns by
//	                                       pos·scale·theta^(-2i/head_dim)/rope_freqs[i];
//	                                       pairs (x[2i], x[2i+1]) for llama (ggml mode 0),
//	                                       (x[i], x[i+head_dim/2]) for qwen2/qwen3 (NEOX))
//	    append k, v to the cache
//	    for each head j: attend with query head j over key/value head j/(n_heads/n_kv_heads),
//	        softmax(q·k_t / sqrt(head_dim)) over t = 0..pos
//	    x += Wo concat(heads)
//	    h = rmsnorm(x) * ffn_norm
//	    x += Wdown (silu(Wgate h) ⊙ Wup h)
//	logits = output (rmsnorm(x) * output_norm)     (output = token_embd when tied)
//
// rmsnorm(x) = x / sqrt(mean(x²) + eps). A weight with GGUF dims [in, out]
// is a row-major [out][in] matrix.
//
// API:
//
//	m, err := reference.Load(f)             // f: a *gguf.File, e.g. native.ReadGGUF(path)
//	s := m.NewState()                       // an empty KV cache, position 0
//	logits, err := s.Forward(tok)           // run one token, return next-token logits
//	toks, err := m.Greedy(prompt, n)        // prompt then n argmax tokens (lowest id on ties)
//	all, err := m.Logits(tokens)            // logits after each token, fresh state
package reference

import (
	"fmt"
	"math"

	"github.com/picometer/picometer/gguf"
)

// Config holds the hyperparameters read from ARCH.* metadata, where ARCH is
// general.architecture ("llama", "qwen2" or "qwen3"), as llama.cpp reads them.
type Config struct {
	Arch      string // general.architecture
	Dim       int    // ARCH.embedding_length
	Layers    int    // ARCH.block_count
	Heads     int    // ARCH.attention.head_count
	KVHeads   int    // ARCH.attention.head_count_kv (default Heads)
	HeadDim   int    // ARCH.attention.key_length (default Dim / Heads)
	FFN       int    // ARCH.feed_forward_length
	Vocab     int    // rows of token_embd
	Context   int    // ARCH.context_length
	RMSEps    float64
	RopeTheta float64 // ARCH.rope.freq_base (default 10000)
	// RopeScale multiplies every RoPE angle: 1/ARCH.rope.scaling.factor
	// under linear scaling (the default type when a factor is given), else 1.
	RopeScale float64
	// RopeNeox: RoPE rotates (x[i], x[i+HeadDim/2]) (qwen2, qwen3) instead
	// of adjacent pairs (llama).
	RopeNeox bool
}

// Layer holds one transformer block's weights (float32, as in the file).
type Layer struct {
	AttnNorm []float32 // [Dim]
	Wq       []float32 // [Heads*HeadDim][Dim]
	Wk       []float32 // [KVHeads*HeadDim][Dim]
	Wv       []float32 // [KVHeads*HeadDim][Dim]
	Bq       []float32 // [Heads*HeadDim] attn_q.bias, nil when absent
	Bk       []float32 // [KVHeads*HeadDim]
	Bv       []float32 // [KVHeads*HeadDim]
	QNorm    []float32 // [HeadDim] attn_q_norm (qwen3), nil when absent
	KNorm    []float32 // [HeadDim] attn_k_norm
	Wo       []float32 // [Dim][Heads*HeadDim]
	FFNNorm  []float32 // [Dim]
	WGate    []float32 // [FFN][Dim]
	WUp      []float32 // [FFN][Dim]
	WDown    []float32 // [Dim][FFN]
	// Act holds each matrix's activation quantization block (ActBlock of
	// its file type; 0: float activations).
	Act struct{ Q, K, V, O, Gate, Up, Down int }
}

// Model is a loaded Llama-family model.
type Model struct {
	Config
	TokEmbd []float32 // [Vocab][Dim]
	Layers  []Layer
	OutNorm []float32 // [Dim]
	Output  []float32 // [Vocab][Dim]; the TokEmbd slice when the file has no output.weight
	// OutputAct is Output's activation quantization block (see Layer.Act).
	OutputAct int
	Tied      bool
	// RopeFactors is the rope_freqs tensor ([HeadDim/2]): pair i's angle is
	// divided by RopeFactors[i] (Llama 3 scaling). nil when absent.
	RopeFactors []float32
}

// Load builds the model from a parsed GGUF file, checking the architecture,
// hyperparameters and every tensor's shape. Weights are copied out of f.
func Load(f *gguf.File) (*Model, error) {
	var c Config
	a, _ := f.Get("general.architecture")
	c.Arch, _ = a.(string)
	var bias, qkNorm int // 0 none, 1 optional, 2 required
	switch c.Arch {
	case "llama":
		bias = 1
	case "qwen2":
		bias, c.RopeNeox = 2, true
	case "qwen3":
		qkNorm, c.RopeNeox = 2, true
	default:
		return nil, fmt.Errorf("reference: general.architecture %v, want llama, qwen2 or qwen3", a)
	}
	var err error
	key := func(s string) string { return c.Arch + "." + s }
	geti := func(k string, def int) int {
		v, ok := f.Get(key(k))
		if !ok {
			if def < 0 && err == nil {
				err = fmt.Errorf("reference: missing key %s", key(k))
			}
			return def
		}
		n, ok := toInt(v)
		if (!ok || n < 1) && err == nil {
			err = fmt.Errorf("reference: %s: %v is not a positive integer", key(k), v)
		}
		return n
	}
	getf := func(k string, def float64) float64 {
		switch v, _ := f.Get(key(k)); x := v.(type) {
		case float32:
			return float64(x)
		case float64:
			return x
		}
		return def
	}
	c.Dim = geti("embedding_length", -1)
	c.Layers = geti("block_count", -1)
	c.Heads = geti("attention.head_count", -1)
	c.KVHeads = geti("attention.head_count_kv", c.Heads)
	c.FFN = geti("feed_forward_length", -1)
	c.Context = geti("context_length", -1)
	c.RMSEps = getf("attention.layer_norm_rms_epsilon", 1e-5)
	c.RopeTheta = getf("rope.freq_base", 10000)
	if err != nil {
		return nil, err
	}
	c.HeadDim = geti("attention.key_length", c.Dim/c.Heads)
	if err != nil {
		return nil, err
	}
	if v := geti("attention.value_length", c.HeadDim); v != c.HeadDim {
		return nil, fmt.Errorf("reference: %s %d differs from the key length %d", key("attention.value_length"), v, c.HeadDim)
	}
	if c.Heads%c.KVHeads != 0 || c.HeadDim%2 != 0 {
		return nil, fmt.Errorf("reference: heads %d, kv heads %d, head dim %d do not make a Llama model",
			c.Heads, c.KVHeads, c.HeadDim)
	}
	c.RopeScale = 1
	st, _ := f.Get(key("rope.scaling.type"))
	switch st {
	case nil, "linear":
		if s := getf("rope.scaling.factor", 0); s != 0 {
			c.RopeScale = 1 / float64(float32(s))
		}
	case "none":
	default:
		return nil, fmt.Errorf("reference: %s %v is not supported", key("rope.scaling.type"), st)
	}
	embd := f.Tensor("token_embd.weight")
	if embd == nil || len(embd.Dims) != 2 {
		return nil, fmt.Errorf("reference: tensor token_embd.weight missing or not 2-D")
	}
	c.Vocab = int(embd.Dims[1])

	m := &Model{Config: c}
	// get loads a tensor of the given dims; need 0 skips it, 1 loads it when
	// present, 2 requires it.
	getOpt := func(need int, name string, dims ...int) []float32 {
		if err != nil || need == 0 {
			return nil
		}
		t := f.Tensor(name)
		if t == nil {
			if need == 2 {
				err = fmt.Errorf("reference: tensor %s: missing", name)
			}
			return nil
		}
		ok := len(t.Dims) == len(dims)
		for i := 0; ok && i < len(dims); i++ {
			ok = t.Dims[i] == uint64(dims[i])
		}
		if !ok {
			err = fmt.Errorf("reference: tensor %s: shape %v want %v", name, t.Dims, dims)
			return nil
		}
		var w []float32
		w, err = t.Float32s()
		return w
	}
	act := func(name string) int {
		if t := f.Tensor(name); t != nil {
			return ActBlock(t.Type)
		}
		return 0
	}
	get := func(name string, dims ...int) []float32 { return getOpt(2, name, dims...) }
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	m.TokEmbd = get("token_embd.weight", c.Dim, c.Vocab)
	m.Layers = make([]Layer, c.Layers)
	for l := range m.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		m.Layers[l] = Layer{
			AttnNorm: get(b+"attn_norm.weight", c.Dim),
			Wq:       get(b+"attn_q.weight", c.Dim, q),
			Wk:       get(b+"attn_k.weight", c.Dim, kv),
			Wv:       get(b+"attn_v.weight", c.Dim, kv),
			Bq:       getOpt(bias, b+"attn_q.bias", q),
			Bk:       getOpt(bias, b+"attn_k.bias", kv),
			Bv:       getOpt(bias, b+"attn_v.bias", kv),
			QNorm:    getOpt(qkNorm, b+"attn_q_norm.weight", c.HeadDim),
			KNorm:    getOpt(qkNorm, b+"attn_k_norm.weight", c.HeadDim),
			Wo:       get(b+"attn_output.weight", q, c.Dim),
			FFNNorm:  get(b+"ffn_norm.weight", c.Dim),
			WGate:    get(b+"ffn_gate.weight", c.Dim, c.FFN),
			WUp:      get(b+"ffn_up.weight", c.Dim, c.FFN),
			WDown:    get(b+"ffn_down.weight", c.FFN, c.Dim),
		}
		a := &m.Layers[l].Act
		a.Q, a.K, a.V = act(b+"attn_q.weight"), act(b+"attn_k.weight"), act(b+"attn_v.weight")
		a.O = act(b + "attn_output.weight")
		a.Gate, a.Up, a.Down = act(b+"ffn_gate.weight"), act(b+"ffn_up.weight"), act(b+"ffn_down.weight")
	}
	m.OutNorm = get("output_norm.weight", c.Dim)
	m.RopeFactors = getOpt(1, "rope_freqs.weight", c.HeadDim/2)
	if f.Tensor("output.weight") != nil {
		m.Output = get("output.weight", c.Dim, c.Vocab)
		m.OutputAct = act("output.weight")
	} else {
		m.Output, m.Tied = m.TokEmbd, true
		m.OutputAct = act("token_embd.weight")
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case uint8:
		return int(x), true
	case int8:
		return int(x), true
	case uint16:
		return int(x), true
	case int16:
		return int(x), true
	case uint32:
		return int(x), true
	case int32:
		return int(x), true
	case uint64:
		return int(x), x <= math.MaxInt32
	case int64:
		return int(x), x >= math.MinInt32 && x <= math.MaxInt32
	}
	return 0, false
}

// State is one sequence being decoded: its position and KV cache.
type State struct {
	m   *Model
	Pos int // tokens run so far: the position of the next token

	kCache, vCache [][]float64 // [Layers][Context][KVHeads*HeadDim]
	// scratch
	x, h, q, k, v, att, hb, gate, up, scores []float64
	xq                                       []float64 // a matmul's quantized activations
}

// NewState returns an empty sequence (position 0).
func (m *Model) NewState() *State {
	c := m.Config
	kv := c.KVHeads * c.HeadDim
	s := &State{m: m,
		kCache: make([][]float64, c.Layers), vCache: make([][]float64, c.Layers),
		x: make([]float64, c.Dim), h: make([]float64, c.Dim),
		q: make([]float64, c.Heads*c.HeadDim), k: make([]float64, kv), v: make([]float64, kv),
		att: make([]float64, c.Heads*c.HeadDim), hb: make([]float64, c.Dim),
		gate: make([]float64, c.FFN), up: make([]float64, c.FFN), scores: make([]float64, c.Context),
		xq: make([]float64, max(c.Dim, c.Heads*c.HeadDim, c.FFN)),
	}
	for l := range s.kCache {
		s.kCache[l] = make([]float64, c.Context*kv)
		s.vCache[l] = make([]float64, c.Context*kv)
	}
	return s
}

// Forward runs token tok at position s.Pos, appends its keys and values to
// the cache, advances s.Pos, and returns the logits for the next token
// (float64 arithmetic, rounded to float32 at the end).
func (s *State) Forward(tok int32) ([]float32, error) {
	m, c := s.m, s.m.Config
	if tok < 0 || int(tok) >= c.Vocab {
		return nil, fmt.Errorf("reference: token %d not in 0..%d", tok, c.Vocab-1)
	}
	if s.Pos >= c.Context {
		return nil, fmt.Errorf("reference: position %d is past the context length %d", s.Pos, c.Context)
	}
	pos, hd, kv := s.Pos, c.HeadDim, c.KVHeads*c.HeadDim
	x := s.x
	for i := range x {
		x[i] = float64(m.TokEmbd[int(tok)*c.Dim+i])
	}
	for l := range m.Layers {
		L := &m.Layers[l]
		// attention
		rmsnorm(s.h, x, L.AttnNorm, c.RMSEps)
		matmulA(s.q, L.Wq, s.h, L.Act.Q, s.xq)
		matmulA(s.k, L.Wk, s.h, L.Act.K, s.xq)
		matmulA(s.v, L.Wv, s.h, L.Act.V, s.xq)
		addBias(s.q, L.Bq)
		addBias(s.k, L.Bk)
		addBias(s.v, L.Bv)
		headNorm(s.q, hd, L.QNorm, c.RMSEps)
		headNorm(s.k, hd, L.KNorm, c.RMSEps)
		ropeExt(s.q, pos, hd, c.RopeTheta, c.RopeScale, m.RopeFactors, c.RopeNeox)
		ropeExt(s.k, pos, hd, c.RopeTheta, c.RopeScale, m.RopeFactors, c.RopeNeox)
		copy(s.kCache[l][pos*kv:], s.k)
		copy(s.vCache[l][pos*kv:], s.v)
		group := c.Heads / c.KVHeads
		for j := 0; j < c.Heads; j++ {
			qh := s.q[j*hd : (j+1)*hd]
			kvOff := (j / group) * hd
			sc := s.scores[:pos+1]
			for t := range sc {
				kt := s.kCache[l][t*kv+kvOff : t*kv+kvOff+hd]
				sc[t] = dot(qh, kt) / math.Sqrt(float64(hd))
			}
			softmax(sc)
			out := s.att[j*hd : (j+1)*hd]
			clear(out)
			for t, p := range sc {
				vt := s.vCache[l][t*kv+kvOff : t*kv+kvOff+hd]
				for i := range out {
					out[i] += p * vt[i]
				}
			}
		}
		matmulA(s.hb, L.Wo, s.att, L.Act.O, s.xq)
		for i := range x {
			x[i] += s.hb[i]
		}
		// feed-forward
		rmsnorm(s.h, x, L.FFNNorm, c.RMSEps)
		matmulA(s.gate, L.WGate, s.h, L.Act.Gate, s.xq)
		matmulA(s.up, L.WUp, s.h, L.Act.Up, s.xq)
		for i := range s.gate {
			g := s.gate[i]
			s.gate[i] = g / (1 + math.Exp(-g)) * s.up[i] // silu(g) * up
		}
		matmulA(s.hb, L.WDown, s.gate, L.Act.Down, s.xq)
		for i := range x {
			x[i] += s.hb[i]
		}
	}
	rmsnorm(s.h, x, m.OutNorm, c.RMSEps)
	logits := make([]float64, c.Vocab)
	matmulA(logits, m.Output, s.h, m.OutputAct, s.xq)
	s.Pos++
	out := make([]float32, c.Vocab)
	for i, v := range logits {
		out[i] = float32(v)
	}
	return out, nil
}

// Logits runs tokens through a fresh state and returns the logits after
// each one.
func (m *Model) Logits(tokens []int32) ([][]float32, error) {
	s := m.NewState()
	all := make([][]float32, len(tokens))
	for i, tok := range tokens {
		var err error
		if all[i], err = s.Forward(tok); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// Greedy runs prompt (at least one token) through a fresh state, then
// generates n tokens, each the argmax of the previous logits, and returns
// them. It stops early, without error, at the context limit.
func (m *Model) Greedy(prompt []int32, n int) ([]int32, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("reference: empty prompt")
	}
	s := m.NewState()
	var logits []float32
	for _, tok := range prompt {
		var err error
		if logits, err = s.Forward(tok); err != nil {
			return nil, err
		}
	}
	out := make([]int32, 0, n)
	for len(out) < n {
		tok := Argmax(logits)
		out = append(out, tok)
		if len(out) == n || s.Pos >= m.Context {
			break
		}
		var err error
		if logits, err = s.Forward(tok); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Argmax returns the index of the largest logit, the lowest on ties.
func Argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// rmsnorm sets out = x / sqrt(mean(x²) + eps) * w.
func rmsnorm(out, x []float64, w []float32, eps float64) {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+eps)
	for i, v := range x {
		out[i] = v * scale * float64(w[i])
	}
}

// matmulA sets out = W x', where x' is x with its activations quantized in
// blocks of block elements (quantAct; block 0: x itself), buf a scratch
// of at least len(x).
func matmulA(out []float64, w []float32, x []float64, block int, buf []float64) {
	if block == 0 {
		matmul(out, w, x)
		return
	}
	xq := buf[:len(x)]
	quantAct(xq, x, block)
	matmul(out, w, xq)
}

// matmul sets out = W x for a row-major W of len(out) rows of len(x).
func matmul(out []float64, w []float32, x []float64) {
	n := len(x)
	for r := range out {
		row := w[r*n : (r+1)*n]
		sum := 0.0
		for c, v := range row {
			sum += float64(v) * x[c]
		}
		out[r] = sum
	}
}

// rope rotates each adjacent pair (x[2i], x[2i+1]) of each head of size hd
// by the angle pos * theta^(-2i/hd).
func rope(x []float64, pos, hd int, theta float64) { ropeExt(x, pos, hd, theta, 1, nil, false) }

// ropeExt rotates pair i of each head of size hd by the angle
// pos * scale * theta^(-2i/hd) / factors[i] (factors nil: 1), as ggml's
// rope without YaRN. The pair is (x[2i], x[2i+1]), or (x[i], x[i+hd/2])
// when neox.
func ropeExt(x []float64, pos, hd int, theta, scale float64, factors []float32, neox bool) {
	for h := 0; h < len(x); h += hd {
		for i := 0; i < hd/2; i++ {
			f := scale * math.Pow(theta, -2*float64(i)/float64(hd))
			if factors != nil {
				f /= float64(factors[i])
			}
			angle := float64(pos) * f
			sin, cos := math.Sincos(angle)
			j, k := h+2*i, h+2*i+1
			if neox {
				j, k = h+i, h+i+hd/2
			}
			a, b := x[j], x[k]
			x[j] = a*cos - b*sin
			x[k] = a*sin + b*cos
		}
	}
}

// addBias adds b to x (nothing when b is nil).
func addBias(x []float64, b []float32) {
	for i, v := range b {
		x[i] += float64(v)
	}
}

// headNorm RMS-normalizes each head of size hd of x with weights w
// (qwen3's q/k norms; nothing when w is nil).
func headNorm(x []float64, hd int, w []float32, eps float64) {
	if w == nil {
		return
	}
	for h := 0; h < len(x); h += hd {
		rmsnorm(x[h:h+hd], x[h:h+hd], w, eps)
	}
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// softmax replaces x by exp(x - max) / sum.
func softmax(x []float64) {
	max := math.Inf(-1)
	for _, v := range x {
		max = math.Max(max, v)
	}
	sum := 0.0
	for i, v := range x {
		x[i] = math.Exp(v - max)
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
}
