//go:build !cgo

package native

// KVBlocks returns zeros: the engine needs cgo.
func (e *Engine) KVBlocks() (used, total int) { return 0, 0 }

// PrefixCache returns zeros: the engine needs cgo.
func (e *Engine) PrefixCache() (queries, hits int64) { return 0, 0 }
