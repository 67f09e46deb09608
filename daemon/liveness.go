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
type waiter struct {
	d         *Daemon
	s         *seq
	conn      net.Conn
	timer     *time.Timer // nil until the first wait
	cancelled bool
}

// wait returns when s has new output or has ended.
func (w *waiter) wait() {
	if w.timer == nil {
		w.timer = time.NewTimer(livenessInterval)
	}
	for {
		select {
		case <-w.s.notify:
			return
		case <-w.timer.C:
			if !w.cancelled && w.conn != nil && clientGone(w.conn) {
				w.cancelled = true
				w.d.loop.cancel(w.s, schema.ErrCancelled)
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
