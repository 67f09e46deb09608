package sidecar

import (
	"net"
	"slices"
)

// This file is the peer check: a daemon connection is served only when the
// connecting process's uid or gid (SO_PEERCRED, Linux) is allowed
// (Config.AllowedUIDs, AllowedGIDs; by default the sidecar's own uid and
// gid). bounds_test.go (TestPeerCredentials) covers it.

// peerPolicy says which peers may connect; nil allows every peer.
type peerPolicy struct {
	uids, gids []uint32
}

// allows reports whether the peer of c may connect, and its credentials.
func (p *peerPolicy) allows(c net.Conn) (ok bool, uid, gid uint32, err error) {
	if p == nil || !peerCredSupported {
		return true, 0, 0, nil
	}
	uid, gid, err = peerCred(c)
	if err != nil {
		return false, 0, 0, err
	}
	return slices.Contains(p.uids, uid) || slices.Contains(p.gids, gid), uid, gid, nil
}
