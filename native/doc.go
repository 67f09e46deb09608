// Package native binds picometer's C engine (engine.c, kernels, and the
// model loader model_load.c on gguf.c, the project's one GGUF parser) to
// Go: a continuous-batching Llama engine whose B_max slots share one KV
// cache, with n-gram speculative decoding and MLC-LLM-style metrics recorded
// in its step loop.
//
// Concurrency: an [Engine] is owned by one goroutine. None of its methods
// may be called concurrently with another on the same Engine; the daemon's
// engine loop is that goroutine and serves everything else over channels.
// [Now] may be called from anywhere.
//
// Built without cgo (CGO_ENABLED=0), [Open] returns [ErrNoCgo]: the package
// still builds, so the daemon (its only importer) vets and its cgo-free code
// tests. native/ imports nothing of picometer's own (docs/ARCHITECTURE.md):
// it reports its own [RequestStats] and [Snapshot], which the daemon turns
// into wire events.
package native
