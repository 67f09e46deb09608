package daemon

import (
	"bufio"
	"net"
	"runtime/debug"
	"time"

	"github.com/picometer/picometer/schema"
)

// This file is streaming: the server-sent events of a stream=true request
// and the write deadline armed before each batch of them. server_test.go
// (streams, abandoned streams, stalls) and e2e_test.go cover it.

// recoverStream, deferred by a stream writer, turns a panic into a logged
// BUG and cancels the request in the engine.
func (d *Daemon) recoverStream(s *seq) {
	if r := recover(); r != nil {
		d.log.Error("BUG: panic streaming a response", "id", s.id, "panic", r, "stack", string(debug.Stack()))
		d.loop.cancel(s, schema.ErrOther)
	}
}

// sseKeepAlive is the comment a silent stream sends every
// stream_keepalive: SSE parsers skip lines starting with ':'.
const sseKeepAlive = ": keep-alive\n\n"

// keepAliveFunc returns a stream's keep-alive writer for its waiter.
func (d *Daemon) keepAliveFunc(w *bufio.Writer, conn net.Conn, flush func() bool) func() bool {
	return func() bool {
		d.armWrite(conn)
		w.WriteString(sseKeepAlive)
		return flush()
	}
}

// flushOrCancel returns a stream writer's flush: the first failed Flush
// means the client left, and the request is cancelled in the engine.
func (d *Daemon) flushOrCancel(w *bufio.Writer, s *seq) func() bool {
	return func() bool {
		if err := w.Flush(); err != nil {
			d.loop.cancel(s, schema.ErrCancelled)
			return false
		}
		return true
	}
}

// stream writes a request's server-sent events: one chunk per engine run
// that produced text (or tokens, when token ids or continuous usage are
// asked), a last chunk with the finish reason, the usage chunk when asked,
// and data: [DONE]. An error after the header went out is an error event.
// The first failed Flush means the client left: the request is cancelled
// in the engine (finish reason abort, error type cancelled); so does a
// client that leaves while its stream is silent (see [waiter]). A stream
// silent for stream_keepalive gets a keep-alive comment (sseKeepAlive).
func (d *Daemon) stream(w *bufio.Writer, conn net.Conn, s *seq, m *respMeta) {
	defer d.recoverStream(s)
	flush := d.flushOrCancel(w, s)
	buf := make([]byte, 0, 512)
	if m.op == schema.OpChat {
		d.armWrite(conn)
		buf = m.appendRoleChunk(buf)
		w.Write(buf)
		if !flush() {
			return
		}
	}
	var out outBuf
	var held []byte // the answer, held back while it may hold tool calls
	completion := 0
	wt := waiter{d: d, s: s, conn: conn, keepAlive: d.keepAliveFunc(w, conn, flush), every: d.cfg.StreamKeepAlive}
	defer wt.stop()
	for {
		wt.wait()
		done, res := s.take(&out)
		if len(out.runs) > 0 || done {
			// Before anything reaches the connection (a large write
			// flushes by itself): the engine may have been silent for
			// longer than the stall timeout.
			d.armWrite(conn)
		}
		wrote := false
		var start runEnd
		for _, end := range out.runs {
			text, toks := out.text[start.text:end.text], out.toks[start.toks:end.toks]
			start = end
			completion += len(toks)
			if m.tools != nil {
				held = append(held, text...)
				continue
			}
			if len(text) == 0 && (len(toks) == 0 || !(m.tokenIDs || m.continuousUsage || m.logprobs)) {
				continue
			}
			m.lp = m.run(&out, start.toks-len(toks), start.toks)
			buf = m.appendChunk(buf[:0], text, toks, "", completion)
			w.Write(buf)
			wrote = true
		}
		if done {
			if res.err != nil {
				buf = appendErrorEvent(buf[:0], res.err)
			} else {
				m.lp = lpRun{}
				finish := res.finish
				buf = buf[:0]
				if m.tools != nil {
					text, calls := m.tools.parseCalls(held, finish)
					if len(text) > 0 {
						buf = m.appendChunk(buf, text, nil, "", completion)
					}
					if len(calls) > 0 {
						buf = m.appendToolCallChunks(buf, calls, completion)
						if finish == schema.FinishStop {
							finish = finishToolCalls
						}
					}
				}
				buf = m.appendChunk(buf, nil, nil, finish, completion)
				if m.includeUsage {
					buf = m.appendUsageChunk(buf, &res.body)
				}
			}
			buf = append(buf, sseDone...)
			w.Write(buf)
			flush()
			return
		}
		if wrote && !flush() {
			return
		}
	}
}

// armWrite gives the writes about to happen on conn stream_stall_timeout
// to complete. fasthttp's WriteTimeout cannot do it (it would cut long
// streams), and without a deadline a client that stops reading would hold
// its connection and goroutine forever. Every response arms it: handle
// when it returns (fasthttp writes the response next), a stream before
// each batch of chunks; so a deadline left by an earlier response on a
// keep-alive connection never applies to a later one.
func (d *Daemon) armWrite(conn net.Conn) {
	if conn != nil {
		conn.SetWriteDeadline(time.Now().Add(d.cfg.StreamStallTimeout))
	}
}
