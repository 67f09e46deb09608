package daemon

import (
	"errors"
	"net"
	"syscall"
)

// clientGone reports whether the peer of conn, a TCP or unix socket, has
// closed its end (or reset the connection). It peeks at the socket with a
// non-blocking recv(MSG_PEEK): 0 bytes is end of file, EAGAIN means the
// peer is there and quiet, bytes waiting (a pipelined next request) mean it
// is there too. Nothing is consumed, so fasthttp's reader misses nothing.
// A client that half-closes its sending side after its request counts as
// gone, as in Go's net/http. Connections that are not sockets report false.
func clientGone(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var b [1]byte
	// Control, not Read: Read would refuse once fasthttp's read deadline
	// for the request has passed.
	err = rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		case err != nil: // ECONNRESET and the like
			gone = true
		case n == 0:
			gone = true
		}
	})
	return gone || errors.Is(err, net.ErrClosed)
}
