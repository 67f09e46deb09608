package native

// ModelFile is what the C loader (gguf.c) read from a GGUF file: the model
// description and every metadata entry, without an engine.
type ModelFile struct {
	Info       ModelInfo // Info.Kernel is "" (no engine chose kernels)
	HeadDim    int
	RMSEps     float32 // ARCH.attention.layer_norm_rms_epsilon (default 1e-5)
	RopeTheta  float32 // ARCH.rope.freq_base (default 10000)
	TiedOutput bool    // no output.weight: the logits reuse token_embd
	F16        bool    // some matrices are stored as F16 (computed as stored)
	// RopeFreqScale is 1/ARCH.rope.scaling.factor under linear scaling, else 1.
	RopeFreqScale float32
	// RopeFactors is the rope_freqs tensor (Llama 3 scaling), nil when absent.
	RopeFactors []float32
	// RopeNeox is true when RoPE rotates (x[i], x[i+head_dim/2]) (qwen2,
	// qwen3), false for adjacent pairs (llama).
	RopeNeox bool
	// TypeMask has bit t set when some matrix has ggml type t (0 f32,
	// 1 f16, 2 q4_0, …, 12 q4_K, 14 q6_K, 30 bf16).
	TypeMask uint64
	// MatrixBytes is the bytes of matrices one decoded token reads: every
	// layer matrix and the output (not the embedding table, of which it
	// reads a row). Decode at batch 1 is bound by it.
	MatrixBytes uint64
	Alignment   uint32 // general.alignment (default 32)
	Tensors     int    // tensors in the file
	// Meta is every metadata entry in file order, as the loader delimited it.
	Meta []MetaKV
}

// MetaKV is one metadata entry as the C loader found it.
type MetaKV struct {
	Key  string
	Type uint32 // GGUF value type (0 uint8 … 12 float64)
	// Value is the encoded value (copied): a scalar's bytes; a string's
	// uint64 length and bytes; an array's element type, uint64 count and
	// elements. gguf's DecodeValue decodes it.
	Value []byte
}
