// Package modelgen writes picometer's deterministic-weight Llama models as
// GGUF v3 files: the default preset the daemon serves and the tiny preset
// the tests use. The mkmodel command (modelgen/cmd/mkmodel) is a thin wrapper;
// tests elsewhere call [Write] directly:
//
//	path := filepath.Join(t.TempDir(), "tiny.gguf")
//	if err := modelgen.Write(path, modelgen.Tiny); err != nil { … }
//
// The same preset always gives the same bytes. Weights are uniform random
// numbers from a splitmix64 stream seeded per tensor (Preset.Seed and the
// tensor name), scaled so activations keep a unit RMS through the layers
// and greedy decoding is neither a constant token nor a 2-cycle (the
// reference package's tests check that).
//
// # Vocabulary and tokenizer metadata
//
// Every model uses the byte-level vocabulary of native/vocab.go (this package
// does not import native, so that native's own tests can import it; native's
// tests check the two agree): ids 0..255 are the bytes, 256.. the control
// tokens. The tokenizer metadata is:
//
//	tokenizer.ggml.model      "picometer-bytes": a text is tokenized as its UTF-8
//	                          bytes, one token per byte, id = byte value; control
//	                          tokens are never produced from text, only inserted
//	                          by the prompt builder (BOS, chat roles)
//	tokenizer.ggml.tokens     "<0x00>".."<0xFF>" (llama.cpp's byte-token spelling),
//	                          then "<|bos|>" "<|eos|>" "<|pad|>" "<|system|>"
//	                          "<|user|>" "<|assistant|>" "<|end|>" "<|unk|>"
//	tokenizer.ggml.token_type llama.cpp's types: 6 (byte) for 0..255, 3 (control)
//	                          for the control tokens, 2 (unknown) for <|unk|>
//	tokenizer.ggml.bos_token_id, eos_token_id, padding_token_id, unknown_token_id
//	tokenizer.ggml.add_bos_token true, add_eos_token false
//	tokenizer.chat_template   [ChatTemplate]
package modelgen

import (
	"fmt"
	"math"

	"github.com/picometer/picometer/gguf"
)

// The vocabulary (mirrors native/vocab.go; native's model test checks it).
const (
	TokBOS       = 256
	TokEOS       = 257
	TokPad       = 258
	TokSystem    = 259
	TokUser      = 260
	TokAssistant = 261
	TokEnd       = 262
	TokUnk       = 263
	VocabSize    = 264
)

// ControlTokens are the control token texts, indexed by id-256.
var ControlTokens = [VocabSize - 256]string{
	"<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|unk|>",
}

// llama.cpp token types (enum llama_token_type).
const (
	tokenTypeUnknown = 2
	tokenTypeControl = 3
	tokenTypeByte    = 6
)

// TokenizerModel is the value of tokenizer.ggml.model: byte-level, one
// token per UTF-8 byte, id = byte value.
const TokenizerModel = "picometer-bytes"

// ChatTemplate is the value of tokenizer.chat_template (Jinja, as
// llama.cpp and Hugging Face expect). It describes picometer's chat format,
// which the daemon implements in Go: BOS, then each message as its role
// token (<|system|>, <|user|> or <|assistant|>), the content's bytes and
// <|end|>; with add_generation_prompt a final <|assistant|> opens the reply,
// and the reply ends at <|end|> (or EOS).
const ChatTemplate = "{{ bos_token }}" +
	"{% for message in messages %}" +
	"{{ '<|' + message['role'] + '|>' }}{{ message['content'] }}{{ '<|end|>' }}" +
	"{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"

// Tokens returns the token texts and llama.cpp token types, by id.
func Tokens() (texts []string, types []int32) {
	texts = make([]string, VocabSize)
	types = make([]int32, VocabSize)
	for i := 0; i < 256; i++ {
		texts[i] = fmt.Sprintf("<0x%02X>", i)
		types[i] = tokenTypeByte
	}
	for i, s := range ControlTokens {
		texts[256+i] = s
		types[256+i] = tokenTypeControl
	}
	types[TokUnk] = tokenTypeUnknown
	return texts, types
}

// Preset describes a model to generate.
type Preset struct {
	Name      string  // general.name
	Dim       int     // llama.embedding_length
	Layers    int     // llama.block_count (1..64)
	Heads     int     // llama.attention.head_count
	KVHeads   int     // llama.attention.head_count_kv (divides Heads)
	FFN       int     // llama.feed_forward_length
	Context   int     // llama.context_length
	RMSEps    float32 // llama.attention.layer_norm_rms_epsilon
	RopeTheta float32 // llama.rope.freq_base
	Seed      uint64  // weight seed (picometer.seed)
	Tied      bool    // no output.weight: the logits reuse token_embd
	F16       bool    // matrices and embeddings as F16 (norms stay F32); Type "f16" says the same
	// Type is the file type, one of Types ("f32", "f16", "q4_k_m", …;
	// "" is f32, or f16 when F16 is set). Matrices are quantized as
	// llama.cpp's quantize would store them (tensorType); 1-D tensors stay F32.
	Type string

	// Shape features of real checkpoints (shapes.go). The zero values give
	// the plain Llama layout of the presets above, byte for byte.
	Arch       string      // general.architecture and key prefix: "" (llama), "llama", "qwen2" or "qwen3"
	HeadDim    int         // ARCH.attention.key_length and value_length; 0: Dim/Heads, keys not written
	Vocab      int         // tokens (rows of token_embd): 0 is VocabSize; more pads with reserved tokens
	QKVBias    bool        // attn_q/k/v.bias (qwen2 requires them)
	QKNorm     bool        // attn_q_norm / attn_k_norm, RMSNorm per head (qwen3 requires them)
	RopeLinear float32     // ARCH.rope.scaling.type "linear" and .factor; 0: not written
	Llama3Rope *Llama3Rope // Llama 3 rope scaling, written as the rope_freqs tensor; nil: none
	// EmbedStd is the standard deviation of token_embd; 0 is 1. A tied
	// model with unit embeddings mostly repeats its input token (a token's
	// own row dominates its logits), so the tied shape presets use less.
	EmbedStd float64
}

// Default is the model picometerd serves by default (about 64 MiB as F32).
var Default = Preset{Name: "picometer-default", Dim: 512, Layers: 6, Heads: 8, KVHeads: 2,
	FFN: 1376, Context: 512, RMSEps: 1e-5, RopeTheta: 10000, Seed: 1}

// Tiny is the test model (about 0.5 MiB). FFN 172 is deliberately not a
// multiple of 8, so the kernels' tail paths run.
var Tiny = Preset{Name: "picometer-tiny", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2,
	FFN: 172, Context: 256, RMSEps: 1e-5, RopeTheta: 10000, Seed: 1}

// TinyK is the tiny model with rows of 256 (or a multiple): the shape
// the per-type tests use, so every tensor of every file type is stored in
// its own type, K-quants included, and no shape fallback applies.
var TinyK = Preset{Name: "picometer-tiny-k", Dim: 256, Layers: 2, Heads: 4, KVHeads: 2,
	FFN: 512, Context: 256, RMSEps: 1e-5, RopeTheta: 10000, Seed: 1}

// Lookup returns the preset called name ("default", "tiny" or "tiny-k").
func Lookup(name string) (Preset, bool) {
	switch name {
	case "default":
		return Default, true
	case "tiny":
		return Tiny, true
	case "tiny-k":
		return TinyK, true
	}
	if p, ok := shapes[name]; ok {
		return p, true
	}
	return Preset{}, false
}

// Validate returns an error naming the first field a Llama model cannot
// have.
func (p *Preset) Validate() error {
	switch {
	case p.Dim < 1:
		return fmt.Errorf("dim %d < 1", p.Dim)
	case p.Layers < 1 || p.Layers > 64:
		return fmt.Errorf("layers %d not in 1..64", p.Layers)
	case p.Heads < 1 || p.HeadDim == 0 && p.Dim%p.Heads != 0:
		return fmt.Errorf("heads %d does not divide dim %d", p.Heads, p.Dim)
	case p.HeadDim < 0 || p.headDim()%2 != 0:
		return fmt.Errorf("head dim %d is odd (RoPE rotates pairs)", p.headDim())
	case p.KVHeads < 1 || p.Heads%p.KVHeads != 0:
		return fmt.Errorf("kv heads %d does not divide heads %d", p.KVHeads, p.Heads)
	case p.FFN < 1:
		return fmt.Errorf("ffn %d < 1", p.FFN)
	case p.Context < 1:
		return fmt.Errorf("context %d < 1", p.Context)
	case !(p.RMSEps > 0) || math.IsInf(float64(p.RMSEps), 0):
		return fmt.Errorf("rms eps %v is not positive and finite", p.RMSEps)
	case !(p.RopeTheta > 0) || math.IsInf(float64(p.RopeTheta), 0):
		return fmt.Errorf("rope theta %v is not positive and finite", p.RopeTheta)
	}
	if err := p.validateShape(); err != nil {
		return err
	}
	_, err := p.fileType()
	return err
}

func (p *Preset) fileType() (fileType, error) {
	if p.Type == "" && p.F16 {
		return lookupType("f16")
	}
	return lookupType(p.Type)
}

// Write generates p's model and writes it to path atomically (a reader
// never sees a partial file).
func Write(path string, p Preset) error { return WriteProgress(path, p, nil) }

// WriteProgress is Write that calls progress (when not nil) after each
// tensor is generated with the weights generated so far and in total.
func WriteProgress(path string, p Preset, progress func(done, total int64)) error {
	f, err := build(p, progress)
	if err != nil {
		return err
	}
	return gguf.WriteFile(path, f)
}

// Build generates p's model in memory.
func Build(p Preset) (*gguf.File, error) { return build(p, nil) }

// Weights is the number of weights p's model has.
func (p *Preset) Weights() int64 {
	hd, v := int64(p.headDim()), int64(p.vocab())
	d, q, kv, ffn := int64(p.Dim), int64(p.Heads)*hd, int64(p.KVHeads)*hd, int64(p.FFN)
	layer := 2*d + d*q + 2*d*kv + q*d + 3*d*ffn
	if p.QKVBias {
		layer += q + 2*kv
	}
	if p.QKNorm {
		layer += 2 * hd
	}
	n := v*d + int64(p.Layers)*layer + d
	if !p.Tied {
		n += v * d
	}
	if p.Llama3Rope != nil {
		n += hd / 2
	}
	return n
}

func build(p Preset, progress func(done, total int64)) (*gguf.File, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("modelgen: preset %s: %w", p.Name, err)
	}
	headDim := p.headDim()
	qDim, kvDim := p.Heads*headDim, p.KVHeads*headDim
	vocab := p.vocab()
	arch := p.arch()
	ft, _ := p.fileType() // Validate checked it
	texts, types := paddedTokens(vocab)
	f := &gguf.File{KV: []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.name", Value: p.Name},
		{Key: "general.description", Value: "deterministic random weights written by picometer's modelgen"},
		{Key: "general.file_type", Value: ft.ftype},
		{Key: gguf.KeyAlignment, Value: uint32(gguf.DefaultAlignment)},
		{Key: "picometer.seed", Value: p.Seed},
		{Key: arch + ".context_length", Value: uint32(p.Context)},
		{Key: arch + ".embedding_length", Value: uint32(p.Dim)},
		{Key: arch + ".block_count", Value: uint32(p.Layers)},
		{Key: arch + ".feed_forward_length", Value: uint32(p.FFN)},
		{Key: arch + ".attention.head_count", Value: uint32(p.Heads)},
		{Key: arch + ".attention.head_count_kv", Value: uint32(p.KVHeads)},
		{Key: arch + ".attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: arch + ".rope.dimension_count", Value: uint32(headDim)},
		{Key: arch + ".rope.freq_base", Value: p.RopeTheta},
		{Key: arch + ".vocab_size", Value: uint32(vocab)},
		{Key: "tokenizer.ggml.model", Value: TokenizerModel},
		{Key: "tokenizer.ggml.tokens", Value: texts},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(TokBOS)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(TokEOS)},
		{Key: "tokenizer.ggml.padding_token_id", Value: uint32(TokPad)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(TokUnk)},
		{Key: "tokenizer.ggml.add_bos_token", Value: true},
		{Key: "tokenizer.ggml.add_eos_token", Value: false},
		{Key: "tokenizer.chat_template", Value: ChatTemplate},
	}}
	f.KV = append(f.KV, p.shapeKV()...)

	// Scales: a matrix with fan-in n gets std 1/sqrt(n), so each output of
	// a unit-RMS input has about unit RMS; embeddings have unit RMS too, so
	// the token and the context weigh about the same in the residual stream.
	// Queries and keys get twice that: attention scores of std ~4 make
	// attention sharp, so the position (RoPE) and the context steer the
	// output. With 1/sqrt(n) the tiny model's greedy output fell into short
	// cycles for 3 of 30 random prompts; with 2/sqrt(n) for none (128
	// tokens each), with ~50 distinct tokens in the last 64.
	layer := -1
	done, total := int64(0), p.Weights()
	add := func(name string, in, out int, std, mean float64) {
		typ := gguf.F32
		if out > 0 {
			typ = ft.tensorType(name, layer, p.Layers, in, p.Tied)
		}
		f.Tensors = append(f.Tensors, tensor(p, name, in, out, std, mean, typ))
		done += int64(in) * int64(max(out, 1))
		if progress != nil {
			progress(done, total)
		}
	}
	matrix := func(name string, in, out int, gain float64) {
		add(name, in, out, gain/math.Sqrt(float64(in)), 0)
	}
	norm := func(name string) { // weights near 1 (uniform 0.9..1.1)
		add(name, p.Dim, 0, 0.1/math.Sqrt(3), 1)
	}
	// Biases are small next to the projections (std 0.2, the projections'
	// outputs have about unit RMS). q/k norm weights are near 2: heads of
	// unit RMS would give attention scores of std ~1 and diffuse attention
	// (greedy output then cycles); 2 restores the std ~4 of the q/k gain.
	vector := func(name string, n int, std, mean float64) { add(name, n, 0, std, mean) }
	embedStd := p.EmbedStd
	if embedStd == 0 {
		embedStd = 1
	}
	add("token_embd.weight", p.Dim, vocab, embedStd, 0)
	for l := 0; l < p.Layers; l++ {
		layer = l
		b := fmt.Sprintf("blk.%d.", l)
		norm(b + "attn_norm.weight")
		matrix(b+"attn_q.weight", p.Dim, qDim, 2)
		matrix(b+"attn_k.weight", p.Dim, kvDim, 2)
		matrix(b+"attn_v.weight", p.Dim, kvDim, 1)
		if p.QKVBias {
			vector(b+"attn_q.bias", qDim, 0.2, 0)
			vector(b+"attn_k.bias", kvDim, 0.2, 0)
			vector(b+"attn_v.bias", kvDim, 0.2, 0)
		}
		if p.QKNorm {
			vector(b+"attn_q_norm.weight", headDim, 0.2/math.Sqrt(3), 2)
			vector(b+"attn_k_norm.weight", headDim, 0.2/math.Sqrt(3), 2)
		}
		matrix(b+"attn_output.weight", qDim, p.Dim, 1)
		norm(b + "ffn_norm.weight")
		matrix(b+"ffn_gate.weight", p.Dim, p.FFN, 1)
		matrix(b+"ffn_up.weight", p.Dim, p.FFN, 1)
		matrix(b+"ffn_down.weight", p.FFN, p.Dim, 1)
	}
	layer = -1
	norm("output_norm.weight")
	if !p.Tied {
		matrix("output.weight", p.Dim, vocab, 1)
	}
	if p.Llama3Rope != nil {
		f.Tensors = append(f.Tensors, ropeFreqsTensor(p.Llama3Rope.Factors(headDim, float64(p.RopeTheta))))
		done += int64(headDim / 2)
	}
	if done != total {
		panic(fmt.Sprintf("BUG: modelgen: generated %d weights, Weights says %d", done, total))
	}
	if progress != nil {
		progress(done, total)
	}
	return f, nil
}

// tensor makes a tensor of shape [in] (out == 0) or [in, out] whose
// elements are mean + uniform noise of standard deviation std, drawn from a
// stream seeded by the preset's seed and the tensor's name, stored as typ
// (encoded row by row: no float32 copy of a whole model).
func tensor(p Preset, name string, in, out int, std, mean float64, typ gguf.TensorType) gguf.Tensor {
	dims := []uint64{uint64(in)}
	rows := 1
	if out > 0 {
		dims = append(dims, uint64(out))
		rows = out
	}
	a := std * math.Sqrt(3) // uniform on [-a, a] has standard deviation a/sqrt(3)
	rng := splitmix64{state: p.Seed ^ fnv64(name)}
	size, err := typ.DataSize(dims)
	if err != nil {
		panic("BUG: modelgen: " + name + ": " + err.Error())
	}
	data := make([]byte, 0, size)
	row := make([]float32, in)
	vocabRows := name == "token_embd.weight" || name == "output.weight"
	for r := 0; r < rows; r++ {
		ar := a
		if vocabRows && r >= VocabSize {
			ar = a * reservedScale
		}
		for i := range row {
			// float64(…) rounds the product: no fused multiply-add on any
			// architecture, so the bytes are the same everywhere.
			row[i] = float32(mean + float64(ar*(2*rng.float64()-1)))
		}
		b, err := gguf.Quantize(typ, row)
		if err != nil {
			panic("BUG: modelgen: " + name + ": " + err.Error())
		}
		data = append(data, b...)
	}
	return gguf.Tensor{Name: name, Dims: dims, Type: typ, Data: data}
}

// splitmix64 is Steele, Lea and Flood's generator (as in Java's
// SplittableRandom): tiny, fast and good enough for weights.
type splitmix64 struct{ state uint64 }

func (s *splitmix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float64 returns a uniform number in [0, 1).
func (s *splitmix64) float64() float64 { return float64(s.next()>>11) * (1.0 / (1 << 53)) }

// fnv64 is FNV-1a, to give every tensor its own stream.
func fnv64(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}
