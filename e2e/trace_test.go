package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/picometer/picometer/internal/testenv"
)

// spanReceiver is a small OTLP/HTTP trace receiver built on the OTLP
// protobuf definitions (VictoriaMetrics v1.150 takes no traces): it
// decodes every export the sidecar sends and keeps its spans.
type spanReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	errs  []string
}

func (s *spanReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		s.errs = append(s.errs, fmt.Sprintf("%s %s %s: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err))
		http.Error(w, "bad export", 400)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// server returns the SERVER span whose gen_ai.response.id is id, and its
// children by name.
func (s *spanReceiver) server(id string) (*tracepb.Span, map[string]*tracepb.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.spans {
		if sp.Kind == tracepb.Span_SPAN_KIND_SERVER && attrs(sp)["gen_ai.response.id"] == id {
			kids := map[string]*tracepb.Span{}
			for _, c := range s.spans {
				if bytes.Equal(c.ParentSpanId, sp.SpanId) {
					kids[c.Name] = c
				}
			}
			return sp, kids
		}
	}
	return nil, nil
}

// attrs renders a span's attributes as strings (an array as its JSON).
func attrs(sp *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range sp.Attributes {
		m[kv.Key] = anyValue(kv.Value)
	}
	return m
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, fmt.Sprintf("%q", anyValue(e)))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v)
}

// tracedResult is what a client saw of one request.
type tracedResult struct {
	status        int
	requestID     string // X-Request-Id answered
	traceresponse string
	id            string // the response id (prefix + request id)
	usage         *struct {
		PromptTokens     int                `json:"prompt_tokens"`
		CompletionTokens int                `json:"completion_tokens"`
		Extra            map[string]float64 `json:"extra"`
	}
	cancelled bool // the client hung up mid-stream
}

func post(t *testing.T, addr, path, body string, hdr map[string]string) tracedResult {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	r := tracedResult{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id"), traceresponse: resp.Header.Get("traceresponse")}
	var obj struct {
		ID    string          `json:"id"`
		Usage json.RawMessage `json:"usage"`
	}
	if strings.Contains(body, `"stream":true`) && resp.StatusCode == 200 {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || line == "[DONE]" {
				continue
			}
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			r.id = obj.ID
			if len(obj.Usage) > 0 && string(obj.Usage) != "null" {
				json.Unmarshal(obj.Usage, &r.usage)
			}
		}
		return r
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		r.id = obj.ID
		json.Unmarshal(obj.Usage, &r.usage)
	}
	return r
}

// TestLiveTraces runs picometerd and the sidecar with its spans exported
// to a real OTLP/HTTP receiver: requests with a traceparent (plain and
// streamed), without one, failed (400 and a client that hung up) and
// rejected (429) each arrive as a SERVER span with the right trace, parent,
// attributes and status; token counts equal usage, and the span's duration
// equals usage.extra.e2e_s within a millisecond.
func TestLiveTraces(t *testing.T) {
	sidecarBin := testenv.Binary(t, "picometer-sidecar")
	daemonBin := testenv.Binary(t, "picometerd")
	model := testenv.File(t, "tiny model (PICOMETER_TINY_MODEL; make models)", os.Getenv("PICOMETER_TINY_MODEL"))
	dir := t.TempDir()
	sock := filepath.Join(dir, "picometer.sock")
	sidecarAddr, daemonAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	httpc := &http.Client{Timeout: 10 * time.Second}

	rcv := &spanReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	sidecar := startEnv(t, dir, "sidecar", []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + ln.Addr().String() + "/v1/traces",
	}, sidecarBin, "--socket", sock, "--listen", sidecarAddr)
	waitFor(t, 15*time.Second, "sidecar /health", sidecar, func() error { return getOK(httpc, "http://"+sidecarAddr+"/health") })
	// One slot and one waiting place, so that a burst is rejected (429).
	cfg := filepath.Join(dir, "picometerd.toml")
	if err := os.WriteFile(cfg, []byte("[engine]\nb_max = 1\nmax_waiting = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon := start(t, dir, "daemon", daemonBin, "--config", cfg, "--model", model, "--listen", daemonAddr, "--metrics-socket", sock)
	waitFor(t, 30*time.Second, "daemon /health", daemon, func() error { return getOK(httpc, "http://"+daemonAddr+"/health") })
	waitConnected(t, httpc, sidecarAddr, sidecar, 15*time.Second)

	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tp := func(n int) map[string]string {
		return map[string]string{"traceparent": "00-" + tid + "-" + pid + "-01", "tracestate": "rojo=1", "X-Request-Id": fmt.Sprintf("tr-%d", n)}
	}
	type sent struct {
		name   string
		res    tracedResult
		parent bool   // sent with a traceparent
		errTyp string // the span's error.type ("" = success)
	}
	var all []sent
	plain := post(t, daemonAddr, "/v1/completions", `{"prompt":"the cat sat","max_tokens":12,"temperature":0}`, tp(1))
	all = append(all, sent{"plain", plain, true, ""})
	streamed := post(t, daemonAddr, "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`, tp(2))
	all = append(all, sent{"streamed", streamed, true, ""})
	root := post(t, daemonAddr, "/v1/completions", `{"prompt":"no header","max_tokens":6,"temperature":0.5,"top_p":0.9}`, nil)
	all = append(all, sent{"no traceparent", root, false, ""})
	bad := post(t, daemonAddr, "/v1/completions", `{"prompt":"x","max_tokens":-1}`, tp(3))
	bad.id = "cmpl-tr-3"
	all = append(all, sent{"400", bad, true, "invalid_request"})

	// A client that hangs up mid-stream: the daemon aborts it (cancelled),
	// unless it had already finished (the tiny model is fast): up to 5 tries.
	cancelled := 0
	for i := 0; i < 5 && cancelled == 0; i++ {
		rid := fmt.Sprintf("hangup-%d", i)
		r := request{method: "POST", path: "/v1/completions",
			body:   fmt.Sprintf(`{"prompt":%q,"max_tokens":180,"temperature":0,"stream":true}`, repetitive),
			header: map[string]string{"X-Request-Id": rid, "traceparent": "00-" + tid + "-" + pid + "-01"}}
		st, _, err := abortStream(daemonAddr, r)
		if err != nil || st != 200 {
			t.Fatalf("hang-up stream: %d %v", st, err)
		}
		id := "cmpl-" + rid
		var sp *tracepb.Span
		waitFor(t, 20*time.Second, "span of "+id, sidecar, func() error {
			if sp, _ = rcv.server(id); sp == nil {
				return fmt.Errorf("no span of %s yet", id)
			}
			return nil
		})
		if attrs(sp)["error.type"] == "cancelled" {
			cancelled++
			all = append(all, sent{"hang-up", tracedResult{status: 200, id: id, requestID: rid, cancelled: true}, true, "cancelled"})
		}
	}
	if cancelled == 0 {
		t.Fatal("no hang-up was cancelled in 5 tries")
	}

	// A burst on one slot and one waiting place: some are rejected (429).
	var mu sync.Mutex
	var wg sync.WaitGroup
	var rejected []tracedResult
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := post(t, daemonAddr, "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":150,"temperature":0}`, repetitive),
				map[string]string{"X-Request-Id": fmt.Sprintf("burst-%d", i), "traceparent": "00-" + tid + "-" + pid + "-01"})
			if r.status == 429 {
				r.id = "cmpl-" + r.requestID
				mu.Lock()
				rejected = append(rejected, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(rejected) == 0 {
		t.Fatal("a burst of 8 on b_max 1, max_waiting 1 had no 429")
	}
	for _, r := range rejected {
		all = append(all, sent{"429", r, true, "queue_full"})
	}

	t.Logf("checking the spans of %d requests (%d cancelled, %d rejected)", len(all), cancelled, len(rejected))
	for _, s := range all {
		var sp *tracepb.Span
		var kids map[string]*tracepb.Span
		waitFor(t, 20*time.Second, "span of "+s.name, sidecar, func() error {
			if sp, kids = rcv.server(s.res.id); sp == nil {
				return fmt.Errorf("no span with gen_ai.response.id %q (of %d)", s.res.id, len(rcv.spans))
			}
			return nil
		})
		a := attrs(sp)
		traceID, spanID := hex.EncodeToString(sp.TraceId), hex.EncodeToString(sp.SpanId)
		if s.parent {
			if traceID != tid || hex.EncodeToString(sp.ParentSpanId) != pid || sp.TraceState != "rojo=1" && s.name != "hang-up" && s.name != "429" {
				t.Errorf("%s: trace %s parent %x state %q, want %s %s", s.name, traceID, sp.ParentSpanId, sp.TraceState, tid, pid)
			}
		} else if len(sp.ParentSpanId) != 0 {
			t.Errorf("%s: a root span has parent %x", s.name, sp.ParentSpanId)
		}
		if s.res.traceresponse != "" && s.res.traceresponse != "00-"+traceID+"-"+spanID+"-01" {
			t.Errorf("%s: traceresponse %q, span %s %s", s.name, s.res.traceresponse, traceID, spanID)
		}
		if !s.res.cancelled && (s.res.requestID == "" || !strings.HasSuffix(s.res.id, s.res.requestID)) {
			t.Errorf("%s: X-Request-Id %q, response id %q", s.name, s.res.requestID, s.res.id)
		}
		op := "text_completion"
		if strings.HasPrefix(s.res.id, "chatcmpl-") {
			op = "chat"
		}
		if sp.Name != op+" "+a["gen_ai.request.model"] || a["gen_ai.operation.name"] != op || a["gen_ai.response.model"] == "" {
			t.Errorf("%s: span %q, attributes %v", s.name, sp.Name, a)
		}
		if s.errTyp == "" {
			if sp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR || a["error.type"] != "" {
				t.Errorf("%s: status %v, error.type %q on a success", s.name, sp.Status, a["error.type"])
			}
			u := s.res.usage
			if u == nil {
				t.Fatalf("%s: no usage in the response", s.name)
			}
			if a["gen_ai.usage.input_tokens"] != fmt.Sprint(u.PromptTokens) || a["gen_ai.usage.output_tokens"] != fmt.Sprint(u.CompletionTokens) {
				t.Errorf("%s: tokens %s/%s, usage %d/%d", s.name, a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"], u.PromptTokens, u.CompletionTokens)
			}
			dur := time.Duration(sp.EndTimeUnixNano - sp.StartTimeUnixNano)
			e2e := time.Duration(u.Extra["e2e_s"] * 1e9)
			if d := dur - e2e; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("%s: span duration %s, usage.extra.e2e_s %s", s.name, dur, e2e)
			}
			if a["gen_ai.server.time_to_first_token"] == "" || a["gen_ai.request.max_tokens"] == "" || kids["queue"] == nil || kids["prefill"] == nil || kids["decode"] == nil {
				t.Errorf("%s: attributes %v, children %v", s.name, a, kids)
			}
			if a["gen_ai.response.finish_reasons"] != `["length"]` && a["gen_ai.response.finish_reasons"] != `["stop"]` {
				t.Errorf("%s: finish reasons %s", s.name, a["gen_ai.response.finish_reasons"])
			}
		} else if sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || a["error.type"] != s.errTyp {
			t.Errorf("%s: status %v, error.type %q, want %s", s.name, sp.Status, a["error.type"], s.errTyp)
		}
	}
	if a := attrs(mustSpan(t, rcv, root.id)); a["gen_ai.request.temperature"] != "0.5" || a["gen_ai.request.top_p"] != "0.9" || a["gen_ai.request.max_tokens"] != "6" {
		t.Errorf("parameters: %v", a)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.errs) > 0 {
		t.Errorf("the receiver refused exports: %v", rcv.errs)
	}
}

func mustSpan(t *testing.T, rcv *spanReceiver, id string) *tracepb.Span {
	sp, _ := rcv.server(id)
	if sp == nil {
		t.Fatalf("no span of %s", id)
	}
	return sp
}
