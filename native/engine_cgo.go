//go:build cgo

package native

import (
	"errors"

	"github.com/picometer/picometer/schema"
)

// Engine is a loaded model with its slots, KV cache, waiting queue and
// metrics. One goroutine owns it (see the package doc).
//
// PLACEHOLDER: the C engine is being written; every method below states the
// contract its implementation keeps.
type Engine struct{}

var errTODO = errors.New("native: engine not implemented yet")

// Open loads the GGUF model at path and allocates everything the engine
// will ever use (slots, KV cache, waiting queue, scratch, step ring) for
// cfg, which is validated first. Errors name the problem (file, field,
// tensor).
func Open(path string, cfg Config) (*Engine, error) { return nil, errTODO }

// Info describes the loaded model.
func (e *Engine) Info() ModelInfo { return ModelInfo{} }

// Config returns the effective configuration (defaults resolved, KVBlocks
// computed when it was 0).
func (e *Engine) Config() Config { return Config{} }

// Submit copies prompt and p into the waiting queue and returns the
// request's id. It fails with ErrQueueFull when MaxWaiting requests are
// already waiting, and with ErrArg (message naming the argument) for an empty
// prompt, a prompt of ContextLength tokens or more, a token outside the
// vocabulary, MaxTokens < 1, or out-of-range sampling parameters.
func (e *Engine) Submit(prompt []int32, p Params) (ID, error) { return 0, errTODO }

// Step runs one scheduler iteration: admit waiting requests into free
// slots, run at most one prefill chunk per prefilling slot, then one decode
// step (or, with speculation, a draft lookup and one verify forward) over
// every slot that is decoding. It returns an Output for every request that
// emitted tokens or finished in this iteration; the slice and everything it
// points to belong to the engine and are valid until the next call. With
// nothing to do it returns (nil, nil) at once. An error means the engine
// failed and cannot continue.
func (e *Engine) Step() ([]Output, error) { return nil, errTODO }

// Cancel removes a waiting or running request, frees its slot and KV
// blocks, and returns its stats with Finish = FinishAbort (engine-owned,
// valid until the next call). ErrNotFound if id is unknown or finished.
func (e *Engine) Cancel(id ID) (*RequestStats, error) { return nil, errTODO }

// Load returns the requests in slots and the requests waiting.
func (e *Engine) Load() (running, waiting int) { return 0, 0 }

// Snapshot writes the engine's cumulative MLC-LLM-style metrics and live
// gauges into dst, and replaces dst.Steps with the step records since the
// previous snapshot (clearing the ring). It leaves dst.EventsDropped alone:
// that counter belongs to the daemon's emitter.
func (e *Engine) Snapshot(dst *schema.EngineBody) {}

// Close frees everything. The Engine must not be used afterwards.
func (e *Engine) Close() error { return nil }
