package native

// ModelFile is what the C loader (gguf.c) read from a GGUF file: the model
// description and every metadata entry, without an engine.
type ModelFile struct {
	Info      ModelInfo // Info.Kernel is "" (no engine chose kernels)
	HeadDim   int
	RMSEps    float32 // ARCH.attention.layer_norm_rms_epsilon (default 1e-5)
	RopeTheta float32 // ARCH.rope.freq_base (default 10000)
	// RopeFreqScale is 1/ARCH.rope.scaling.factor under linear scaling, else 1.
	RopeFreqScale float32
	// RopeFactors is the rope_freqs tensor (Llama 3 scaling), nil when absent.
	RopeFactors []float32
	// RopeNeox is true when RoPE rotates (x[i], x[i+head_dim/2]) (qwen2,
	// qwen3), false for adjacent pairs (llama).
	RopeNeox   bool
	TiedOutput bool   // no output.weight: the logits reuse token_embd
	F16        bool   // some weights were stored as F16 (the loader widened them)
	Alignment  uint32 // general.alignment (default 32)
	Tensors    int    // tensors in the file
	// Meta is every metadata entry in file order, as the loader delimited it.
	Meta []MetaKV
}

// MetaKV is one metadata entry as the C loader found it.
type MetaKV struct {
	Key  string
	Type uint32 // GGUF value type (0 uint8 … 12 float64)
	// Value is the encoded value (copied): a scalar's bytes; a string's
	// uint64 length and bytes; an array's element type, uint64 count and
	// elements. native/gguf's DecodeValue decodes it.
	Value []byte
}
