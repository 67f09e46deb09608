//go:build !linux

package sidecar

import (
	"errors"
	"net"
)

// peerCred is not implemented outside Linux: connections are not checked
// (the socket's directory and mode still are).
func peerCred(net.Conn) (uid, gid uint32, err error) {
	return 0, 0, errors.New("SO_PEERCRED is Linux-only")
}

const peerCredSupported = false
