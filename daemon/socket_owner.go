package daemon

import (
	"fmt"
	"os"
	"slices"
	"syscall"
)

// checkSocketOwner returns an error unless the file at path is a unix
// socket owned by euid, by a uid in trustedUIDs or a gid in trustedGIDs: a
// socket another local user created first (a squatter) must not receive the
// daemon's events. emitter_test.go (TestEmitterRefusesSquatter) covers it.
func checkSocketOwner(path string, euid int, trustedUIDs, trustedGIDs []int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("socket %s: not a socket (mode %v)", path, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // no owner to check on this platform
	}
	uid, gid := int(st.Uid), int(st.Gid)
	if uid == euid || slices.Contains(trustedUIDs, uid) || slices.Contains(trustedGIDs, gid) {
		return nil
	}
	return fmt.Errorf("socket %s: owned by uid %d gid %d, not by this process's uid %d nor a trusted uid or gid (metrics.trusted_uids, metrics.trusted_gids); not connecting", path, uid, gid, euid)
}
