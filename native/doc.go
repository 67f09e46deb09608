// Package native binds picometer's C engine to Go: a continuous-batching
// Llama engine whose B_max slots share one KV cache, with n-gram
// speculative decoding and MLC-LLM-style metrics recorded in its step loop.
//
// The C side is one file per stage under engine.h (the cgo boundary):
// engine_api.c (the engine object and its API), sched.c (admission,
// preemption, prefill and decode steps), spec.c (n-gram drafts),
// forward.c (the forward pass), kv.c (KV blocks), sample.c (sampling),
// pool.c (compute threads), stepmetrics.c (metrics); below them the
// kernels (matmul.c chooses one per weight type) and the model loader (model_load.c on gguf.c, the project's one GGUF
// parser).
// docs/ARCHITECTURE.md's C floors table says which may call which.
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
