package daemon

import (
	"bufio"
	"net"
	"strconv"
	"unicode/utf8"

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
// A request with tools (tool_choice not "none") may be answered with
// calls, which are known only once the answer ends: its answer is held
// back (as chat's stream holds it), and after response.in_progress come
// the items at the end: the message's events as above (its text in one
// delta) when there is text or no call, then per call, at the next
// output_index:
//
//	response.output_item.added                the function_call, in progress, arguments ""
//	response.function_call_arguments.delta    its arguments, in fragments of at most 32 bytes
//	response.function_call_arguments.done     the name and whole arguments
//	response.output_item.done                 the function_call, completed
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

// messageStart appends the events that open the output message.
func (e *responseEvents) messageStart() {
	e.begin("response.output_item.added")
	e.buf = append(e.buf, `,"output_index":0,"item":{"id":`...)
	e.buf = appendJSONString(e.buf, e.m.resp.msgID)
	e.buf = append(e.buf, `,"type":"message","status":"in_progress","role":"assistant","content":[]}`...)
	e.end()
	e.begin("response.content_part.added")
	e.item()
	e.buf = append(e.buf, `,"part":{"type":"output_text","text":"","annotations":[]}`...)
	e.end()
}

// textDelta appends an output_text delta of the message.
func (e *responseEvents) textDelta(text []byte) {
	e.begin("response.output_text.delta")
	e.item()
	e.buf = append(e.buf, `,"delta":`...)
	e.buf = appendJSONString(e.buf, text)
	e.buf = append(e.buf, `,"logprobs":[]`...)
	e.end()
}

// messageDone appends the events that close the output message, whose
// whole text is text.
func (e *responseEvents) messageDone(text []byte, status string) {
	e.begin("response.output_text.done")
	e.item()
	e.buf = append(e.buf, `,"text":`...)
	e.buf = appendJSONString(e.buf, text)
	e.buf = append(e.buf, `,"logprobs":[]`...)
	e.end()
	e.begin("response.content_part.done")
	e.item()
	e.buf = append(e.buf, `,"part":`...)
	e.buf = appendOutputText(e.buf, text)
	e.end()
	e.begin("response.output_item.done")
	e.buf = append(e.buf, `,"output_index":0,"item":`...)
	e.buf = e.m.appendOutputMessage(e.buf, text, status)
	e.end()
}

// functionCall appends the events of call c, output item index.
func (e *responseEvents) functionCall(index int, c *parsedCall) {
	at := func() {
		e.buf = append(e.buf, `,"output_index":`...)
		e.buf = strconv.AppendInt(e.buf, int64(index), 10)
	}
	e.begin("response.output_item.added")
	at()
	e.buf = append(e.buf, `,"item":`...)
	e.buf = appendFunctionCallItem(e.buf, c, "", statusInProgress)
	e.end()
	for a := c.args; len(a) > 0; {
		n := min(len(a), argFragment)
		for n < len(a) && !utf8.RuneStart(a[n]) { // whole characters
			n++
		}
		e.begin("response.function_call_arguments.delta")
		at()
		e.buf = append(e.buf, `,"item_id":`...)
		e.buf = appendJSONString(e.buf, c.itemID())
		e.buf = append(e.buf, `,"delta":`...)
		e.buf = appendJSONString(e.buf, a[:n])
		e.end()
		a = a[n:]
	}
	e.begin("response.function_call_arguments.done")
	at()
	e.buf = append(e.buf, `,"item_id":`...)
	e.buf = appendJSONString(e.buf, c.itemID())
	e.buf = append(e.buf, `,"name":`...)
	e.buf = appendJSONString(e.buf, c.name)
	e.buf = append(e.buf, `,"arguments":`...)
	e.buf = appendJSONString(e.buf, c.args)
	e.end()
	e.begin("response.output_item.done")
	at()
	e.buf = append(e.buf, `,"item":`...)
	e.buf = appendFunctionCallItem(e.buf, c, c.args, statusCompleted)
	e.end()
}

// streamResponse writes a Responses stream (see the file comment). The
// first failed Flush means the client left: the request is cancelled in
// the engine, as in [Daemon.stream].
func (d *Daemon) streamResponse(w *bufio.Writer, conn net.Conn, s *seq, m *respMeta) {
	defer d.recoverStream(s)
	flush := d.flushOrCancel(w, s)
	e := responseEvents{m: m, buf: make([]byte, 0, 1024)}
	hold := m.tools != nil // the answer may be calls: its items are known at its end
	d.armWrite(conn)
	e.response("response.created", nil, "", nil)
	e.response("response.in_progress", nil, "", nil)
	if !hold {
		e.messageStart()
	}
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
			if !hold {
				e.textDelta(text)
			}
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
				text, calls := all, []parsedCall(nil)
				if hold {
					text, calls = m.tools.parseCalls(all)
				}
				status, index := responseStatus(res.finish), 0
				if len(text) > 0 || len(calls) == 0 {
					if hold {
						e.messageStart()
						if len(text) > 0 {
							e.textDelta(text)
						}
					}
					e.messageDone(text, status)
					index++
				}
				for i := range calls {
					e.functionCall(index, &calls[i])
					index++
				}
				typ := "response.completed"
				if status == statusIncomplete {
					typ = "response.incomplete"
				}
				e.begin(typ)
				e.buf = append(e.buf, `,"response":`...)
				e.buf = m.appendResponseCalls(e.buf, text, calls, res.finish, &res.body)
				e.end()
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
