package sidecar

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/picometer/picometer/schema"
)

func TestLineReader(t *testing.T) {
	f := func(input string, max int, want ...string) {
		t.Helper()
		for _, r := range []io.Reader{strings.NewReader(input), iotest.OneByteReader(strings.NewReader(input)), iotest.HalfReader(strings.NewReader(input))} {
			lr := newLineReader(r, max)
			var got []string
			for {
				line, err := lr.next()
				if err == errLineTooLong {
					got = append(got, "TOO LONG")
					break
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("lines of %q (max %d) with %T: got %q, want %q", input, max, r, got, want)
			}
		}
	}
	f("", 10)
	f("a\n", 10, "a")
	f("a\nbb\n\nccc", 10, "a", "bb", "", "ccc")
	f("0123456789\n", 10, "0123456789")
	f("0123456789x\nnext\n", 10, "TOO LONG")
	f("ok\n0123456789x", 10, "ok", "TOO LONG")
	f("ok\n0123456789", 10, "ok", "0123456789")
	long := strings.Repeat("y", 200000)
	f(long+"\nz\n", 300000, long, "z") // grows past the initial buffer
	f(long+"\n", 199999, "TOO LONG")
}

// TestLineReaderShrinks: after a long line the buffer goes back to its
// initial size, so a connection that once sent a big snapshot does not keep
// holding memory.
func TestLineReaderShrinks(t *testing.T) {
	input := strings.Repeat("y", 300000) + "\nsmall\n" + "tail\n"
	lr := newLineReader(iotest.HalfReader(strings.NewReader(input)), 1<<20)
	for {
		_, err := lr.next()
		if err != nil {
			break
		}
	}
	if len(lr.buf) != lineBufSize {
		t.Fatalf("buffer is %d bytes after the stream, want %d", len(lr.buf), lineBufSize)
	}
}

func TestListenSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")

	ln, err := ListenSocket(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want socket 0660", fi.Mode())
	}

	// A live socket is not replaced.
	_, err = ListenSocket(path, 0o660)
	if err == nil || !strings.Contains(err.Error(), "another process is listening on it") {
		t.Fatalf("second listener: %v", err)
	}

	// A stale socket (its process gone, the file left behind) is.
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the stale socket file should still exist: %v", err)
	}
	ln2, err := ListenSocket(path, 0o600)
	if err != nil {
		t.Fatalf("replacing a stale socket: %v", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dialing the new socket: %v", err)
	}
	c.Close()
	ln2.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket file should be removed on close: %v", err)
	}

	// Anything else at the path is left alone.
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("keep me"), 0o644)
	if _, err := ListenSocket(regular, 0o660); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Fatal("the regular file was touched")
	}
}

// TestServeConnBadInput sends every malformed case between good lines on one
// connection: each is counted under its reason, every good line is applied.
func TestServeConnBadInput(t *testing.T) {
	a := newTestAggregator(true)
	data := goldenStreamNamed(t, "stream_bad")
	st := feed(t, a, data)
	lines := bytes.Count(data, []byte("\n"))
	if st.Err != nil || st.Lines != lines || st.Applied != 4 || st.Rejected != 7 {
		t.Fatalf("stats %+v for %d lines", st, lines)
	}
	prom := parseExposition(t, exposition(a))
	for reason, want := range map[string]float64{
		"malformed_json": 2, "unknown_kind": 1, "invalid_field": 3, "no_hello": 1,
		"stale_seq": 0, "unsupported_version": 0, "line_too_long": 0,
	} {
		if got := prom[seriesKey("picometer_sidecar_decode_errors_total", map[string]string{"reason": reason})]; got != want {
			t.Errorf("decode errors %s = %v, want %v", reason, got, want)
		}
	}
	base := map[string]string{"gen_ai_request_model": "golden-model", "engine": "picometer", "gen_ai_operation_name": "text_completion"}
	if got := prom[seriesKey("picometer_requests_finished_total", with(base, "finish_reason", "stop"))]; got != 2 {
		t.Errorf("requests finished = %v, want the 2 good requests", got)
	}
	// The out-of-set values (finish_reason "timeout", operation
	// "embeddings") made no series.
	for k := range prom {
		if strings.Contains(k, `finish_reason="timeout"`) || strings.Contains(k, "embeddings") {
			t.Errorf("out-of-set value became a series: %s", k)
		}
	}
	// The snapshot whose preemptions went back was not applied at all.
	if got := prom[seriesKey("picometer_engine_preemptions_total", map[string]string{"gen_ai_request_model": "golden-model", "engine": "picometer"})]; got != 2 {
		t.Errorf("preemptions = %v, want 2", got)
	}
}

// TestServeConnClosingReasons: an unsupported version or an oversized line
// ends the connection, counted; what came before is applied; other
// connections are not affected.
func TestServeConnClosingReasons(t *testing.T) {
	for _, tc := range []struct {
		name, bad, reason string
	}{
		{"version", `{"v":2,"kind":"request","boot":"ffffffffffffffff","seq":3}`, schema.ReasonUnsupportedVersion},
		{"unversioned", `{"kind":"request","boot":"ffffffffffffffff","seq":3}`, schema.ReasonUnsupportedVersion},
		{"too_long", `{"v":1,"kind":"request","pad":"` + strings.Repeat("x", 5000) + `"}`, schema.ReasonLineTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAggregator(false)
			s := newSim(t, "ffffffffffffffff", "m")
			req := schema.RequestBody{ID: "r", Operation: schema.OpChat, AdmittedUS: 1, FirstTokenUS: 2, LastTokenUS: 2,
				FinishUS: 3, CompletionTokens: 1, FinishReason: schema.FinishStop}
			var data []byte
			data = append(data, s.hello()...)
			data = append(data, s.request(req)...)
			data = append(data, tc.bad+"\n"...)
			data = append(data, s.request(req)...) // never read
			server, client := net.Pipe()
			go func() { client.Write(data); client.Close() }()
			st := ServeConn(server, a, 4096, discardLogger())
			server.Close()
			if schema.ReasonOf(st.Err) != tc.reason || st.Applied != 2 || st.Rejected != 1 || st.Lines != 3 {
				t.Fatalf("stats %+v", st)
			}
			prom := parseExposition(t, exposition(a))
			if got := prom[seriesKey("picometer_sidecar_decode_errors_total", map[string]string{"reason": tc.reason})]; got != 1 {
				t.Fatalf("%s = %v", tc.reason, got)
			}
			if got := prom[seriesKey("picometer_sidecar_events_total", map[string]string{"kind": "request"})]; got != 1 {
				t.Fatalf("requests applied = %v, want 1", got)
			}
			// The daemon reconnects and goes on.
			s2 := feed(t, a, append(s.hello(), s.request(req)...))
			if s2.Applied != 2 {
				t.Fatalf("reconnect: %+v", s2)
			}
		})
	}
}

// TestSeveralDaemons serves three daemons at once over a real unix socket,
// through Sidecar.Serve, and scrapes them.
func TestSeveralDaemons(t *testing.T) {
	s, _, stop := serveSidecar(t, DefaultConfig(), nil)
	socket := s.cfg.Socket

	const perDaemon = 200
	models := []string{"alpha", "beta", "gamma"}
	var wg sync.WaitGroup
	conns := make([]net.Conn, len(models))
	for i, m := range models {
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := newSim(t, strings.Repeat(string(rune('a'+i)), 16), m)
			buf := d.hello()
			for range perDaemon {
				buf = append(buf, d.request(schema.RequestBody{ID: "r", Operation: schema.OpChat, AdmittedUS: 1, FirstTokenUS: 2,
					LastTokenUS: 9, FinishUS: 10, CompletionTokens: 3, ITLUS: []int64{3, 4}, FinishReason: schema.FinishStop})...)
			}
			c.Write(buf)
		}()
	}
	wg.Wait()
	waitFor(t, func() bool {
		return s.Agg.self.events[kindRequest].c.Get() == uint64(len(models)*perDaemon)
	})
	prom := parseExposition(t, exposition(s.Agg))
	if got := prom[seriesKey("picometer_sidecar_connections", nil)]; got != 3 {
		t.Fatalf("connections = %v, want 3", got)
	}
	for _, m := range models {
		base := map[string]string{"gen_ai_request_model": m, "engine": "picometer", "gen_ai_operation_name": "chat"}
		if got := prom[seriesKey("picometer_request_inter_token_latency_seconds_count", base)]; got != 2*perDaemon {
			t.Fatalf("%s: ITL count %v, want %d", m, got, 2*perDaemon)
		}
	}
	// Closing the listener ends the daemons' connections too.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("connection still open after shutdown")
		}
		c.Close()
	}
	if got := s.Agg.self.connections.g.Get(); got != 0 {
		t.Fatalf("connections after shutdown = %v", got)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left behind: %v", err)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	waitWithin(t, 10*time.Second, cond)
}

// waitWithin is waitFor with its own time limit.
func waitWithin(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FuzzConn feeds arbitrary bytes to the connection handler over a
// net.Pipe: it never panics, and every line it reads is either applied or
// counted under a reason, in its stats and in the self-metrics alike.
func FuzzConn(f *testing.F) {
	for _, path := range append(globT(f, filepath.Join(streamsDir, "*.ndjson")), globT(f, filepath.Join(eventsDir, "*.ndjson"))...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("{\"v\":1}\n\n\n" + strings.Repeat("z", 5000) + "\n"))
	f.Add([]byte(`{"v":3}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newTestAggregator(true)
		server, client := net.Pipe()
		go func() { client.Write(data); client.Close() }()
		st := ServeConn(server, a, 4096, discardLogger())
		server.Close()
		if st.Lines != st.Applied+st.Rejected {
			t.Fatalf("%d lines, %d applied, %d rejected", st.Lines, st.Applied, st.Rejected)
		}
		var applied, rejected uint64
		for _, c := range a.self.events {
			applied += c.c.Get()
		}
		for _, c := range a.self.decodeErrors {
			rejected += c.c.Get()
		}
		if applied != uint64(st.Applied) || rejected != uint64(st.Rejected) {
			t.Fatalf("self-metrics say %d applied %d rejected, stats %+v", applied, rejected, st)
		}
		if st.Err == nil {
			want := bytes.Count(data, []byte("\n"))
			if len(data) > 0 && data[len(data)-1] != '\n' {
				want++
			}
			if st.Lines != want {
				t.Fatalf("read %d lines of %d", st.Lines, want)
			}
		}
		if got := a.self.connections.g.Get(); got != 0 {
			t.Fatalf("connections = %v after close", got)
		}
		exposition(a)
		collect(t, a)
	})
}

func globT(tb testing.TB, pattern string) []string {
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		tb.Fatalf("no files match %s", pattern)
	}
	return m
}

func TestClosesConnection(t *testing.T) {
	for _, r := range schema.DecodeReasons {
		want := r == schema.ReasonUnsupportedVersion || r == schema.ReasonLineTooLong ||
			r == schema.ReasonBootInUse || r == schema.ReasonTooManyTargets || r == schema.ReasonBufferFull
		if closesConnection(r) != want {
			t.Errorf("closesConnection(%s) = %v", r, !want)
		}
	}
}
