//go:build cgo

package native

/*
#include "engine.h"
*/
import "C"

// KVBlocks returns the KV-cache blocks in use and in total, as they are
// now. Like every Engine method it must be called from the goroutine that
// owns the engine; it is cheap (no copy of the metrics, no step records
// taken), so the daemon's engine loop calls it after every iteration to
// publish the routing gauges.
func (e *Engine) KVBlocks() (used, total int) {
	if e.c == nil {
		return 0, 0
	}
	var m *C.pm_engine_metrics
	if C.pm_engine_get_metrics(e.c, &m) != C.PM_OK {
		return 0, 0
	}
	return int(m.kv_blocks_used), int(m.kv_blocks_total)
}

// PrefixCache returns the prefix cache's cumulative counters as they are
// now: prompt tokens looked up and found (both 0 with NoPrefixCache).
// Same rules and cost as KVBlocks.
func (e *Engine) PrefixCache() (queries, hits int64) {
	if e.c == nil {
		return 0, 0
	}
	var m *C.pm_engine_metrics
	if C.pm_engine_get_metrics(e.c, &m) != C.PM_OK {
		return 0, 0
	}
	return int64(m.prefix_queries), int64(m.prefix_hits)
}
