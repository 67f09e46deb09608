package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/picometer/picometer/schema"
)

// ListenSocket listens on the unix stream socket at path with the given
// permission bits. A socket file left by a process that is gone (nothing
// answers a dial) is replaced; a live one (another sidecar listening) is an
// error, and so is a path that exists but is not a socket. The socket file is
// removed when the listener closes.
func ListenSocket(path string, mode os.FileMode) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("socket %s: the path exists and is not a socket; not replacing it", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: another process is listening on it (is a sidecar already running?)", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("socket %s: removing the stale socket file: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return ln, nil
}

// PrepareSocketDir makes dir, the directory of the default socket path,
// ready: it is created with mode 0700 when missing, then it must be a
// directory (not a symbolic link) owned by euid that no one else can write
// (mode 0700 or 0750, nothing writable by group or others). A directory
// someone else made first (a squatter's) is refused with an error naming
// its owner. A configured socket path is the operator's choice (for
// example the shared emptyDir of a Kubernetes pod) and is not checked.
func PrepareSocketDir(dir string, euid int) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s: not a directory (mode %v); refusing it", dir, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid {
		return fmt.Errorf("socket directory %s: owned by uid %d, not by this process's uid %d; refusing it (another user may have made it first)", dir, st.Uid, euid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s: mode %04o lets others write in it; refusing it (want 0700)", dir, fi.Mode().Perm())
	}
	return nil
}

// serveSocket accepts connections until ln is closed, each served on its
// own goroutine, at most maxConns at once: one more is closed at once and
// counted (too_many_connections). It returns when ln is closed and every
// connection ended.
//
// A connection whose peer the policy does not allow is closed at once and
// counted (peer_not_allowed).
func serveSocket(ln net.Listener, a *Aggregator, maxLine, maxConns int, peers *peerPolicy, log *slog.Logger) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				break
			}
			log.Warn("socket accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if ok, uid, gid, err := peers.allows(nc); !ok {
			a.self.reject(&schema.DecodeError{Reason: schema.ReasonPeerNotAllowed})
			nc.Close()
			log.Debug("daemon connection refused", "reason", schema.ReasonPeerNotAllowed, "uid", uid, "gid", gid, "err", err)
			continue
		}
		mu.Lock()
		full := len(open) >= maxConns
		if !full {
			open[nc] = true
		}
		mu.Unlock()
		if full {
			a.self.reject(&schema.DecodeError{Reason: schema.ReasonTooManyConnections})
			nc.Close()
			log.Debug("daemon connection refused", "reason", schema.ReasonTooManyConnections, "max_connections", maxConns)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := ServeConn(nc, a, maxLine, log)
			nc.Close()
			mu.Lock()
			delete(open, nc)
			mu.Unlock()
			log.Debug("daemon connection closed", "lines", st.Lines, "applied", st.Applied, "rejected", st.Rejected, "err", st.Err)
		}()
	}
	// The listener is closed: end the open connections too.
	mu.Lock()
	for nc := range open {
		nc.Close()
	}
	mu.Unlock()
	wg.Wait()
}

// ConnStats says what ServeConn did with a connection.
type ConnStats struct {
	Lines    int   // lines read (a final line without a newline included)
	Applied  int   // lines applied to the aggregation
	Rejected int   // lines counted under a decode reason
	Err      error // why the connection ended: nil at EOF, else the read error or the closing rejection
}

// ServeConn reads NDJSON lines from r until EOF, a read error, or a line
// whose rejection closes the connection (line_too_long,
// unsupported_version). Every line is either applied or counted under its
// reason; nothing in the bytes can make it panic.
func ServeConn(r io.Reader, a *Aggregator, maxLine int, log *slog.Logger) ConnStats {
	c := a.Connect()
	defer c.Close()
	lr := newLineReader(r, maxLine)
	lr.budget = a.buffers
	defer lr.release()
	var dec schema.Decoder
	var ev schema.Event
	var st ConnStats
	reads := -1
	for {
		line, err := lr.next()
		if lr.reads != reads {
			reads = lr.reads
			c.SetNow(a.now())
		}
		if err == errBufferFull {
			st.Lines++
			st.Rejected++
			de := &schema.DecodeError{Reason: schema.ReasonBufferFull,
				Msg: fmt.Sprintf("a partial line of %d bytes needs more buffer than the connections' shared max_buffered_bytes leaves; closing the connection", lr.end-lr.start)}
			c.Reject(de)
			log.Warn("daemon connection closed", "reason", de.Reason, "err", de.Msg)
			st.Err = de
			return st
		}
		if err == errLineTooLong {
			st.Lines++
			st.Rejected++
			de := &schema.DecodeError{Reason: schema.ReasonLineTooLong,
				Msg: fmt.Sprintf("line longer than %d bytes; closing the connection", maxLine)}
			c.Reject(de)
			log.Warn("daemon connection closed", "reason", de.Reason, "err", de.Msg)
			st.Err = de
			return st
		}
		if err != nil {
			if err != io.EOF {
				st.Err = err
			}
			return st
		}
		st.Lines++
		err = dec.Decode(line, &ev)
		if err == nil {
			err = c.Apply(&ev)
			if schema.ReasonOf(err) == schema.ReasonBootInUse {
				err = c.retryHello(&ev, a.bootWait)
			}
		}
		if err == nil {
			st.Applied++
			continue
		}
		st.Rejected++
		c.Reject(err)
		reason := schema.ReasonOf(err)
		if reason == schema.ReasonInvalidField || reason == schema.ReasonUnknownKind {
			c.Skip(&ev)
		}
		if closesConnection(reason) {
			// A refusal by a cap is logged at debug: a flood of them would
			// flood the log too; the counter by reason is the signal.
			level := slog.LevelWarn
			if reason == schema.ReasonTooManyTargets || reason == schema.ReasonBootInUse {
				level = slog.LevelDebug
			}
			log.Log(context.Background(), level, "daemon connection closed", "reason", reason, "err", err)
			st.Err = err
			return st
		}
		if log.Enabled(context.Background(), slog.LevelDebug) {
			log.Debug("socket line rejected", "reason", reason, "err", err)
		}
	}
}

var (
	errLineTooLong = errors.New("line too long")
	errBufferFull  = errors.New("buffer budget exhausted")
)

// budget is the bytes the connections' line buffers may grow by, together,
// beyond their initial lineBufSize each.
type budget struct{ left atomic.Int64 }

func newBudget(n int64) *budget {
	b := &budget{}
	b.left.Store(n)
	return b
}

// take reserves n bytes, or reports false when fewer are left.
func (b *budget) take(n int64) bool {
	if b.left.Add(-n) >= 0 {
		return true
	}
	b.left.Add(n)
	return false
}

func (b *budget) give(n int64) { b.left.Add(n) }

// BootInUseWait is how long a hello that claims a connected boot waits for
// that boot's other connection to end before it is refused (boot_in_use):
// a daemon that reconnects after its connection broke may say hello before
// the sidecar has read the end of the old one.
const BootInUseWait = time.Second

// retryHello applies the hello ev again every 10 ms until it is not refused
// as boot_in_use or wait has passed.
func (c *Conn) retryHello(ev *schema.Event, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		time.Sleep(10 * time.Millisecond)
		err := c.Apply(ev)
		if schema.ReasonOf(err) != schema.ReasonBootInUse || time.Now().After(deadline) {
			return err
		}
	}
}

// lineReader splits a stream into lines of at most max bytes (newline
// excluded). Its buffer starts small and grows to max+1 only while a long
// line is being read.
type lineReader struct {
	r          io.Reader
	buf        []byte
	start, end int // unread bytes are buf[start:end]
	scanned    int // buf[start:scanned] holds no newline
	max        int
	err        error
	reads      int     // Read calls so far
	budget     *budget // growth beyond lineBufSize is taken from it (nil: unbounded)
}

// grown is the bytes of the buffer beyond its initial size.
func (lr *lineReader) grown() int64 { return int64(max(len(lr.buf)-lineBufSize, 0)) }

// release gives the grown bytes back to the budget, and a buffer of the
// initial size back to the pool.
func (lr *lineReader) release() {
	if lr.budget != nil {
		lr.budget.give(lr.grown())
	}
	if b := lr.buf; len(b) == lineBufSize {
		lineBufs.Put(&b)
	}
	lr.buf = nil
}

const lineBufSize = 64 << 10

// lineBufs recycles the connections' initial buffers. A flood of short
// connections (TestLiveBootFlood: 10,000 hellos, one connection each)
// allocated 64 KiB per connection, 640 MB in all, under the sidecar's 8 MiB
// memory limit; pooling cut its collections from ~6,600 to ~5,300.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, lineBufSize); return &b }}

func newLineReader(r io.Reader, max int) *lineReader {
	if max+1 < lineBufSize {
		return &lineReader{r: r, buf: make([]byte, max+1), max: max}
	}
	return &lineReader{r: r, buf: *lineBufs.Get().(*[]byte), max: max}
}

// next returns the next line, valid until the following call;
// errLineTooLong when a line exceeds max (the reader is then unusable);
// io.EOF or the read error once everything was returned. A last line
// without a newline is returned before io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.scanned:lr.end], '\n'); i >= 0 {
			j := lr.scanned + i
			line := lr.buf[lr.start:j]
			lr.start, lr.scanned = j+1, j+1
			if len(line) > lr.max {
				return nil, errLineTooLong
			}
			return line, nil
		}
		lr.scanned = lr.end
		if lr.end-lr.start > lr.max {
			return nil, errLineTooLong
		}
		if lr.err == errBufferFull {
			return nil, errBufferFull
		}
		if lr.err != nil {
			if lr.start < lr.end {
				line := lr.buf[lr.start:lr.end]
				lr.start, lr.scanned = lr.end, lr.end
				return line, nil
			}
			return nil, lr.err
		}
		lr.fill()
	}
}

// fill reads more bytes, first making room: moving the unread tail to the
// front, growing the buffer (up to max+1) when the tail fills it, or
// shrinking it back once a long line is gone.
func (lr *lineReader) fill() {
	n := lr.end - lr.start
	switch {
	case n == 0 && len(lr.buf) > lineBufSize:
		if lr.budget != nil {
			lr.budget.give(lr.grown())
		}
		lr.buf = make([]byte, lineBufSize)
	case n == len(lr.buf):
		size := min(2*len(lr.buf), lr.max+1)
		if lr.budget != nil && !lr.budget.take(int64(max(size-lineBufSize, 0))-lr.grown()) {
			lr.err = errBufferFull
			return
		}
		nb := make([]byte, size)
		copy(nb, lr.buf[lr.start:lr.end])
		lr.buf = nb
	case lr.start > 0:
		copy(lr.buf, lr.buf[lr.start:lr.end])
	}
	lr.scanned -= lr.start
	lr.start, lr.end = 0, n
	m, err := lr.r.Read(lr.buf[lr.end:])
	lr.reads++
	lr.end += m
	if err != nil {
		lr.err = err
	}
}

// closesConnection reports whether a line rejected for reason ends its
// connection: the rest of an unversioned or unframed stream cannot be trusted.
func closesConnection(reason string) bool {
	switch reason {
	case schema.ReasonUnsupportedVersion, schema.ReasonLineTooLong, schema.ReasonBootInUse, schema.ReasonTooManyTargets,
		schema.ReasonBufferFull:
		return true
	}
	return false
}
