package daemon

import (
	"net"
	"time"

	"github.com/picometer/picometer/schema"
)

// livenessInterval is how often a request that is waiting for output checks
// whether its client is still connected.
const livenessInterval = 100 * time.Millisecond

// waiter waits for a request's output and meanwhile watches its client.
//
// fasthttp tells a handler nothing about its client until a write fails,
// and a non-streamed response is written once, at the end; a stream writes
// nothing while its request waits in the queue or prefills. So, every
// livenessInterval without output, the waiter asks the kernel whether the
// client has closed its end of the connection ([clientGone]) and, if so,
// cancels the request in the engine (finish reason abort, error type
// cancelled) instead of generating for nobody until the deadline.
//
// A stream's waiter also keeps it alive: when it has written nothing for
// the stream_keepalive interval (queued, prefilling, or between slow
// steps) it writes an SSE comment (keepAlive) so that proxies with idle
// timeouts do not cut it; a comment line is ignored by every SSE parser.
type waiter struct {
	d         *Daemon
	s         *seq
	conn      net.Conn
	timer     *time.Timer // nil until the first wait
	cancelled bool

	keepAlive func() bool // writes and flushes a keep-alive comment; false when the client left
	every     time.Duration
	last      time.Time // the stream's last output or keep-alive
}

// wait returns when s has new output or has ended.
func (w *waiter) wait() {
	if w.timer == nil {
		w.timer = time.NewTimer(livenessInterval)
		w.last = time.Now()
	}
	for {
		select {
		case <-w.s.notify:
			w.last = time.Now()
			return
		case now := <-w.timer.C:
			if !w.cancelled && w.conn != nil && clientGone(w.conn) {
				w.cancelled = true
				w.d.loop.cancel(w.s, schema.ErrCancelled)
			}
			if !w.cancelled && w.keepAlive != nil && w.every > 0 && now.Sub(w.last) >= w.every {
				w.last = now
				if !w.keepAlive() {
					w.cancelled = true // the failed flush cancelled the request
				}
			}
			w.timer.Reset(livenessInterval)
		}
	}
}

func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
