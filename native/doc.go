// Package native binds picometer's C engine (engine.c, kernels, gguf.c) to
// Go: a continuous-batching Llama engine whose B_max slots share one KV
// cache, with n-gram speculative decoding and MLC-LLM-style metrics recorded
// in its step loop.
//
// Concurrency: an [Engine] is owned by one goroutine. None of its methods
// may be called concurrently with another on the same Engine; the daemon's
// engine loop is that goroutine and serves everything else over channels.
// [Now] may be called from anywhere.
//
// Built without cgo (CGO_ENABLED=0), [Open] returns [ErrNoCgo] so packages
// that import this one (schema/, sidecar/) still build and test.
package native
