// Package tokenizer turns text into the token ids of a model and back,
// from the vocabulary a GGUF file carries (tokenizer.ggml.*), the way
// llama.cpp reads it, with results identical to Hugging Face's tokenizers
// (the oracle tests compare both on thousands of strings).
//
// The Hugging Face pipeline's stages are the seams, one file each:
//
//	normalizer     NFC (qwen2), SentencePiece's ▁ for spaces   tokenizer.go
//	pre-tokenizer  the regex splitters by tokenizer.ggml.pre   pretokenize.go
//	               sequences of regexes (DeepSeek, Falcon)      pretokenize_seq.go
//	model          BPE by merge rank or score                  bpe.go
//	               byte-level alphabet (gpt2)                  bytelevel.go
//	added tokens   control/user-defined texts matched in text  special.go
//	decoder        ids → bytes                                 decode.go
//	loader         GGUF metadata → Vocab → Tokenizer           vocab.go
//	converter      tokenizer.json → Vocab (mkmodel)            hf.go
//	chat template  tokenizer.chat_template (package jinja)     template.go
//
// Models (tokenizer.ggml.model): "gpt2" (byte-level BPE with merges; its
// tokenizer.ggml.pre is any name llama.cpp accepts for the Llama 3, Qwen2,
// Qwen3.5, GPT-2, StarCoder, Falcon, DeepSeek LLM, DeepSeek Coder or default
// regexes: the preTokenizers table), "llama" (SentencePiece-style BPE with
// byte fallback, by merges when the file has them, else by scores),
// "gemma4" (the same by merges, each line and run of newlines apart) and
// "picometer-bytes" (one token per byte). Any other model or
// pre-tokenizer is a load error naming the value. llama.cpp's own test
// vectors (models/ggml-vocab-*.gguf.inp/.out) pass for every vocabulary
// of theirs that loads (TestLlamaCppVectors).
//
// Encoding allocates nothing per piece beyond the output slice (merge
// state comes from a pool); it runs before the engine, never in its step
// loop.
package tokenizer
