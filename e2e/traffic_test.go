package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// request is one HTTP request the traffic driver sends to the daemon.
type request struct {
	name   string
	kind   string // requests of one kind create the same series
	method string
	path   string
	body   string
	// stream reads an SSE response; abort closes the connection (with an
	// RST) after the first event instead of reading to the end.
	stream, abort bool
	// wantStatus is the expected HTTP status (200 unless an error).
	wantStatus int
	// event says whether the daemon must send a request event for it (every
	// request to a generation endpoint, failed or not).
	event bool
	// header holds extra request headers (abortStream sends them).
	header map[string]string
}

// The prompt repeats itself so the n-gram drafter finds drafts.
const repetitive = "the cat sat on the mat. the cat sat on the mat. the cat sat on the"

// longer returns a prompt that starts with repetitive and goes on, from a
// number i on, for more than one KV block (16 tokens): once a repetitive
// completion has been served, its prefix comes from the cache and the rest
// is computed, a partial hit, whatever other longer prompts ran (each
// differs from the others right after repetitive). Repeated repetitive
// completions are full hits (all but its last block cached), and the first
// request of every kind a miss.
func longer(i int) string {
	return fmt.Sprintf("%s %d: the dog slept by the door and the bird sang in the old tree outside", repetitive, i)
}

// traffic returns the requests of the live check: streaming and not, chat
// and completions, greedy and sampled, aborted streams, and invalid
// requests that the daemon must answer with an OpenAI-shaped error.
func traffic(model string) []request {
	var rs []request
	gen := func(name, path, body string, stream bool) {
		rs = append(rs, request{name: name, kind: strings.TrimRight(name, " 0123456789"), method: http.MethodPost, path: path,
			body: body, stream: stream, wantStatus: 200, event: true})
	}
	chat := func(content string, extra string) string {
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]%s}`, model, content, extra)
	}
	for i := 0; i < 10; i++ {
		gen(fmt.Sprintf("completion %d", i), "/v1/completions",
			fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d,"temperature":0}`, model, repetitive, 24+8*i), false)
	}
	for i := 0; i < 10; i++ {
		gen(fmt.Sprintf("chat stream %d", i), "/v1/chat/completions",
			chat(repetitive, fmt.Sprintf(`,"max_tokens":%d,"temperature":0,"stream":true,"stream_options":{"include_usage":true}`, 32+4*i)), true)
	}
	for i := 0; i < 4; i++ {
		gen(fmt.Sprintf("sampled chat %d", i), "/v1/chat/completions",
			chat("tell me about picometer", fmt.Sprintf(`,"max_tokens":40,"temperature":0.8,"seed":%d`, i+1)), false)
	}
	for i := 0; i < 4; i++ {
		gen(fmt.Sprintf("partially cached completion %d", i), "/v1/completions",
			fmt.Sprintf(`{"prompt":%q,"max_tokens":16,"temperature":0}`, longer(i)), false)
	}
	for i := 0; i < 4; i++ {
		gen(fmt.Sprintf("completion stream %d", i), "/v1/completions",
			fmt.Sprintf(`{"prompt":%q,"max_tokens":48,"temperature":0,"stream":true}`, repetitive), true)
	}
	for i := 0; i < 6; i++ {
		path, body := "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":180,"temperature":0,"stream":true}`, repetitive)
		if i%2 == 1 {
			path, body = "/v1/chat/completions", chat(repetitive, `,"max_tokens":160,"temperature":0,"stream":true`)
		}
		rs = append(rs, request{name: fmt.Sprintf("aborted stream %d", i), kind: "aborted " + path, method: http.MethodPost, path: path, body: body,
			stream: true, abort: true, wantStatus: 200, event: true})
	}
	bad := func(name, method, path, body string, status int, event bool) {
		rs = append(rs, request{name: name, kind: "invalid", method: method, path: path, body: body, wantStatus: status, event: event})
	}
	bad("malformed JSON", http.MethodPost, "/v1/completions", `{"prompt": "x",`, 400, true)
	bad("missing prompt", http.MethodPost, "/v1/completions", `{"max_tokens": 5}`, 400, true)
	bad("messages not a list", http.MethodPost, "/v1/chat/completions", `{"messages": "hello"}`, 400, true)
	bad("n=2", http.MethodPost, "/v1/completions", `{"prompt": "x", "n": 2}`, 400, true)
	bad("GET a generation endpoint", http.MethodGet, "/v1/chat/completions", "", 405, true)
	bad("unknown route", http.MethodPost, "/v1/nope", `{}`, 404, false)
	return rs
}

// waves splits reqs into a warm-up (the first request of each kind) and n
// waves holding the rest, each with a share of every kind. The sidecar
// creates a series when its first observation arrives, and Prometheus's
// rate() sees no increase in a series' first sample: so the warm-up creates
// the series, and the waves, sent after Prometheus scraped it, move them.
func waves(reqs []request, n int) (warmup []request, rest [][]request) {
	rest = make([][]request, n)
	seen := map[string]bool{}
	i := 0
	for _, r := range reqs {
		if !seen[r.kind] {
			seen[r.kind] = true
			warmup = append(warmup, r)
			continue
		}
		rest[i%n] = append(rest[i%n], r)
		i++
	}
	return warmup, rest
}

// result is what one request got.
type result struct {
	req    request
	status int
	events int // SSE data events read
	err    error
}

// drive sends reqs to the daemon at addr with the given concurrency and
// returns their results in order.
func drive(addr string, reqs []request, concurrency int) []result {
	results := make([]result, len(reqs))
	client := &http.Client{Timeout: 60 * time.Second}
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r := reqs[i]
				res := result{req: r}
				if r.abort {
					res.status, res.events, res.err = abortStream(addr, r)
				} else {
					res.status, res.events, res.err = send(client, addr, r)
				}
				results[i] = res
			}
		}()
	}
	for i := range reqs {
		work <- i
	}
	close(work)
	wg.Wait()
	return results
}

// send performs r and checks the shape of its answer: a completion object,
// an SSE stream ending in [DONE], or an OpenAI error object.
func send(c *http.Client, addr string, r request) (status, events int, err error) {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, "http://"+addr+r.path, body)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		data, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(data, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			return resp.StatusCode, 0, fmt.Errorf("HTTP %d without an OpenAI error object: %.200s", resp.StatusCode, data)
		}
		return resp.StatusCode, 0, nil
	}
	if !r.stream {
		var c struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		data, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) != 1 || c.Usage.CompletionTokens < 1 {
			return resp.StatusCode, 0, fmt.Errorf("not a completion with usage: %.300s", data)
		}
		return resp.StatusCode, 0, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if data == "[DONE]" {
				done = true
				break
			}
			events++
			if !json.Valid([]byte(data)) {
				return resp.StatusCode, events, fmt.Errorf("SSE event is not JSON: %.200s", data)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return resp.StatusCode, events, err
	}
	if !done {
		return resp.StatusCode, events, fmt.Errorf("stream ended without [DONE] after %d events", events)
	}
	return resp.StatusCode, events, nil
}

// abortStream sends a streaming request over a raw connection, reads the
// response header and the first SSE event, then resets the connection: a
// client that goes away mid-stream.
func abortStream(addr string, r request) (status, events int, err error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	tcp := conn.(*net.TCPConn)
	defer func() {
		tcp.SetLinger(0) // close with RST, like a killed client
		tcp.Close()
	}()
	tcp.SetDeadline(time.Now().Add(30 * time.Second))
	var hdr strings.Builder
	for k, v := range r.header {
		fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(tcp, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		r.method, r.path, addr, len(r.body), hdr.String(), r.body)
	br := bufio.NewReader(tcp)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, 0, err
	}
	status = resp.StatusCode
	if status != 200 {
		return status, 0, fmt.Errorf("aborted stream got HTTP %d", status)
	}
	// Read until the first data event, then hang up.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if bytes.HasPrefix(sc.Bytes(), []byte("data: ")) {
			return status, 1, nil
		}
	}
	return status, 0, fmt.Errorf("no SSE event before the stream ended: %v", sc.Err())
}
