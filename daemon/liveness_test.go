package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// tcpPair returns the server side and the client side of a loopback TCP
// connection.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

func TestClientGone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("clientGone only tells on linux")
	}
	// eventually waits for the kernel to deliver what the client did.
	eventually := func(conn net.Conn, want bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for clientGone(conn) != want {
			if time.Now().After(deadline) {
				t.Fatalf("clientGone stays %v, want %v", !want, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, tc := range []struct {
		name   string
		client func(s, c *net.TCPConn)
		gone   bool
	}{
		{"idle client", func(s, c *net.TCPConn) {}, false},
		{"pipelined request waiting", func(s, c *net.TCPConn) { c.Write([]byte("GET / HTTP/1.1\r\n")) }, false},
		{"read deadline passed", func(s, c *net.TCPConn) { s.SetReadDeadline(time.Now().Add(-time.Second)) }, false},
		{"client closed", func(s, c *net.TCPConn) { c.Close() }, true},
		{"client closed after pipelining", func(s, c *net.TCPConn) { c.Write([]byte("x")); c.Close() }, false},
		{"client reset", func(s, c *net.TCPConn) { c.SetLinger(0); c.Close() }, true},
		{"client half-closed", func(s, c *net.TCPConn) { c.CloseWrite() }, true},
		{"server side closed", func(s, c *net.TCPConn) { s.Close() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := tcpPair(t)
			tc.client(s, c)
			eventually(s, tc.gone)
			time.Sleep(10 * time.Millisecond)
			if clientGone(s) != tc.gone {
				t.Errorf("clientGone changed its mind")
			}
			// Peeking consumed nothing.
			if tc.name == "pipelined request waiting" {
				s.SetReadDeadline(time.Now().Add(time.Second))
				b := make([]byte, 64)
				n, _ := s.Read(b)
				if string(b[:n]) != "GET / HTTP/1.1\r\n" {
					t.Errorf("read %q after peeking", b[:n])
				}
			}
		})
	}
	a, b := net.Pipe()
	defer a.Close()
	b.Close()
	if clientGone(a) {
		t.Errorf("a net.Pipe is not a socket: clientGone cannot tell, so false")
	}
}

// rawRequest sends a POST over a fresh TCP connection and returns it
// unread.
func rawRequest(t *testing.T, ts *testServer, path, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	return conn
}

// TestClientDisconnectWhileWaiting: a client that leaves while its request
// produces nothing it could be told (a non-streamed request running or
// queued, a stream waiting in the queue) cancels the request in the engine
// within about livenessInterval, not at its deadline.
func TestClientDisconnectWhileWaiting(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.gen = forever
	eng.stepDelay = time.Millisecond
	eng.cfg.BMax = 1
	ts := startServer(t, eng, nil)
	// The one slot runs a non-streamed request; a stream and another
	// non-streamed request wait.
	running := rawRequest(t, ts, "/v1/completions", `{"prompt":"run","max_tokens":1000000}`)
	waitFor(t, 5*time.Second, "the first request to run", func() bool { r, _ := eng.Load(); return r == 1 })
	queuedStream := rawRequest(t, ts, "/v1/completions", `{"prompt":"s","max_tokens":1000000,"stream":true}`)
	queued := rawRequest(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"q"}],"max_tokens":100}`)
	waitFor(t, 5*time.Second, "two waiting requests", func() bool { _, w := eng.Load(); return w == 2 })

	cancelled := func() int {
		n := 0
		for _, ev := range ts.sink.requests() {
			if ev.FinishReason == schema.FinishAbort && ev.ErrorType == schema.ErrCancelled {
				n++
			}
		}
		return n
	}
	start := time.Now()
	queuedStream.Close()
	queued.Close()
	waitFor(t, 5*time.Second, "the queued requests to be cancelled", func() bool { _, w := eng.Load(); return w == 0 })
	waitFor(t, 5*time.Second, "two cancelled events", func() bool { return cancelled() == 2 })
	running.Close()
	waitFor(t, 5*time.Second, "the running request to be cancelled", func() bool { r, _ := eng.Load(); return r == 0 })
	waitFor(t, 5*time.Second, "three cancelled events", func() bool { return cancelled() == 3 })
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("disconnects noticed after %s", d)
	}
	// A live client waiting as long is not cancelled.
	conn := rawRequest(t, ts, "/v1/completions", `{"prompt":"abc","max_tokens":30}`)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if c := decodeCompletionResponse(t, body); resp.StatusCode != 200 || c.Usage.CompletionTokens != 30 {
		t.Errorf("live client: %d %s", resp.StatusCode, body)
	}
}
