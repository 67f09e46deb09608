package daemon

import (
	"bufio"
	"net"
	"strconv"

	"github.com/picometer/picometer/schema"
)

// This file streams a /v1/responses request (stream: true) as the
// Responses API's server-sent events, each "event: <type>" and a data
// line whose object repeats the type and carries a sequence_number that
// counts from 0:
//
//	response.created              the response, status in_progress, no output
//	response.in_progress          the same
//	response.output_item.added    the assistant message, in progress, no content
//	response.content_part.added   an empty output_text part
//	response.output_text.delta    one per engine run that produced text
//	response.output_text.done     the whole text
//	response.content_part.done    the part with the whole text
//	response.output_item.done     the message, completed (or incomplete)
//	response.completed            the whole response with its usage (usage.extra too);
//	                              response.incomplete when max_output_tokens cut it
//
// An error after the header went out (the deadline, an engine failure) is
// an "error" event, and the stream ends. Unlike the chat stream there is
// no data: [DONE]. responses_test.go covers it.

// responseEvents writes one stream's events, numbering them.
type responseEvents struct {
	m   *respMeta
	seq int
	buf []byte
}

// begin starts an event of type typ: its SSE lines up to the data
// object's fields after type and sequence_number.
func (e *responseEvents) begin(typ string) {
	e.buf = append(e.buf, "event: "...)
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, "\ndata: {\"type\":\""...)
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, `","sequence_number":`...)
	e.buf = strconv.AppendInt(e.buf, int64(e.seq), 10)
	e.seq++
}

func (e *responseEvents) end() { e.buf = append(e.buf, "}\n\n"...) }

// item appends the output item's position and id.
func (e *responseEvents) item() {
	e.buf = append(e.buf, `,"output_index":0,"item_id":`...)
	e.buf = appendJSONString(e.buf, e.m.resp.msgID)
	e.buf = append(e.buf, `,"content_index":0`...)
}

func (e *responseEvents) response(typ string, text []byte, finish string, b *schema.RequestBody) {
	e.begin(typ)
	e.buf = append(e.buf, `,"response":`...)
	e.buf = e.m.appendResponseObject(e.buf, text, finish, b)
	e.end()
}

// streamResponse writes a Responses stream (see the file comment). The
// first failed Flush means the client left: the request is cancelled in
// the engine, as in [Daemon.stream].
func (d *Daemon) streamResponse(w *bufio.Writer, conn net.Conn, s *seq, m *respMeta) {
	defer d.recoverStream(s)
	flush := d.flushOrCancel(w, s)
	e := responseEvents{m: m, buf: make([]byte, 0, 1024)}
	d.armWrite(conn)
	e.response("response.created", nil, "", nil)
	e.response("response.in_progress", nil, "", nil)
	e.begin("response.output_item.added")
	e.buf = append(e.buf, `,"output_index":0,"item":{"id":`...)
	e.buf = appendJSONString(e.buf, m.resp.msgID)
	e.buf = append(e.buf, `,"type":"message","status":"in_progress","role":"assistant","content":[]}`...)
	e.end()
	e.begin("response.content_part.added")
	e.item()
	e.buf = append(e.buf, `,"part":{"type":"output_text","text":"","annotations":[]}`...)
	e.end()
	w.Write(e.buf)
	if !flush() {
		return
	}
	var out outBuf
	var all []byte
	wt := waiter{d: d, s: s, conn: conn, keepAlive: d.keepAliveFunc(w, conn, flush), every: d.cfg.StreamKeepAlive}
	defer wt.stop()
	for {
		wt.wait()
		done, res := s.take(&out)
		if len(out.runs) > 0 || done {
			d.armWrite(conn)
		}
		e.buf = e.buf[:0]
		var start runEnd
		for _, end := range out.runs {
			text := out.text[start.text:end.text]
			start = end
			if len(text) == 0 {
				continue
			}
			all = append(all, text...)
			e.begin("response.output_text.delta")
			e.item()
			e.buf = append(e.buf, `,"delta":`...)
			e.buf = appendJSONString(e.buf, text)
			e.buf = append(e.buf, `,"logprobs":[]`...)
			e.end()
		}
		if done {
			if res.err != nil {
				e.begin("error")
				e.buf = append(e.buf, `,"code":`...)
				e.buf = appendJSONNullString(e.buf, res.err.Code)
				e.buf = append(e.buf, `,"message":`...)
				e.buf = appendJSONString(e.buf, res.err.Message)
				e.buf = append(e.buf, `,"param":`...)
				e.buf = appendJSONNullString(e.buf, res.err.Param)
				e.end()
			} else {
				e.begin("response.output_text.done")
				e.item()
				e.buf = append(e.buf, `,"text":`...)
				e.buf = appendJSONString(e.buf, all)
				e.buf = append(e.buf, `,"logprobs":[]`...)
				e.end()
				e.begin("response.content_part.done")
				e.item()
				e.buf = append(e.buf, `,"part":`...)
				e.buf = appendOutputText(e.buf, all)
				e.end()
				e.begin("response.output_item.done")
				e.buf = append(e.buf, `,"output_index":0,"item":`...)
				e.buf = m.appendOutputMessage(e.buf, all, responseStatus(res.finish))
				e.end()
				typ := "response.completed"
				if responseStatus(res.finish) == statusIncomplete {
					typ = "response.incomplete"
				}
				e.response(typ, all, res.finish, &res.body)
			}
			w.Write(e.buf)
			flush()
			return
		}
		if len(e.buf) > 0 {
			w.Write(e.buf)
			if !flush() {
				return
			}
		}
	}
}
