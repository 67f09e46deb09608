package daemon

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// This file: server_test.go covers it (chunked bodies: the 413 and the error
// event of an oversized one).

// chunkedOps remembers the operation of chunked requests to a completions
// endpoint while fasthttp reads their body. When such a body turns out to
// be over the limit, fasthttp resets the request (path included) before it
// calls the error handler, which then finds the operation here and can
// send the request event. Keys are the request headers of fasthttp's
// pooled request contexts, so the map never holds more entries than there
// are contexts, and every request served removes its own entry.
type chunkedOps struct {
	n  atomic.Int32 // entries; the common case (none) costs one load
	mu sync.Mutex
	m  map[*fasthttp.RequestHeader]string
}

// headerReceived is fasthttp's HeaderReceived hook: it notes chunked
// requests to a completions endpoint. It changes no limit.
func (c *chunkedOps) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.ContentLength() != -1 { // -1: chunked
		return fasthttp.RequestConfig{}
	}
	path, _, _ := bytes.Cut(h.RequestURI(), []byte("?"))
	if op := opOf(path); op != "" {
		c.mu.Lock()
		if c.m == nil {
			c.m = make(map[*fasthttp.RequestHeader]string)
		}
		if _, ok := c.m[h]; !ok {
			c.n.Add(1)
		}
		c.m[h] = op
		c.mu.Unlock()
	}
	return fasthttp.RequestConfig{}
}

// take removes and returns the operation noted for h ("" if none).
func (c *chunkedOps) take(h *fasthttp.RequestHeader) string {
	if c.n.Load() == 0 {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	op, ok := c.m[h]
	if ok {
		delete(c.m, h)
		c.n.Add(-1)
	}
	return op
}
