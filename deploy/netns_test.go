package deploy

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// netns is a network namespace of its own, like a pod's or a container's:
// its loopback is up and nothing else is in it, so programs listening on
// fixed default ports (8000, 9464) there collide with nothing on the host.
// One OS thread, locked and never released, lives in it: processes it
// starts are born in it (fork copies the thread's namespaces), and sockets
// it opens belong to it.
type netns struct{ do chan func() }

func newNetns(t *testing.T) *netns {
	t.Helper()
	n := &netns{do: make(chan func())}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- loopbackUp()
		for f := range n.do {
			f()
		}
	}()
	if err := <-errc; err != nil {
		missing(t, "a network namespace of its own: %v (needs root)", err)
	}
	t.Cleanup(func() { close(n.do) })
	return n
}

// loopbackUp brings lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// run calls f on the namespace's thread and waits for it.
func (n *netns) run(f func()) {
	done := make(chan struct{})
	n.do <- func() { defer close(done); f() }
	<-done
}

// start starts cmd inside the namespace.
func (n *netns) start(cmd *exec.Cmd) (err error) {
	n.run(func() { err = cmd.Start() })
	return err
}

// client is an HTTP client whose connections are opened inside the
// namespace.
func (n *netns) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			n.run(func() { c, err = (&net.Dialer{}).DialContext(ctx, network, addr) })
			return c, err
		},
	}}
}
