package sidecar

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// asOtherUID runs this test binary as uid/gid 65534 (setpriv; root only)
// with the helper test named run and env.
func asOtherUID(t *testing.T, run string, env ...string) ([]byte, error) {
	t.Helper()
	if os.Geteuid() != 0 || !peerCredSupported {
		t.Skip("needs root on Linux (setpriv to another uid)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "sidecar.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^"+run+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// TestHelperDialAs is not a test: asOtherUID runs it as another uid to say
// hello on PICOMETER_HELPER_SOCKET and wait for the sidecar to close.
func TestHelperDialAs(t *testing.T) {
	sock := os.Getenv("PICOMETER_HELPER_SOCKET")
	if sock == "" {
		t.Skip("helper")
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(newSim(t, "0707070707070707", "other-uid").hello())
	c.(*net.UnixConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, c)
}

// TestPeerCredentials: a process of another uid that can reach the socket
// is refused (peer_not_allowed) unless its uid or gid is allowed.
func TestPeerCredentials(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		cfg := DefaultConfig()
		if allowed {
			cfg.AllowedGIDs = []int{65534}
		}
		s, _ := startSidecar(t, cfg, nil)
		os.Chmod(filepath.Dir(filepath.Dir(s.cfg.Socket)), 0o755)
		os.Chmod(filepath.Dir(s.cfg.Socket), 0o755)
		os.Chmod(s.cfg.Socket, 0o666)
		out, err := asOtherUID(t, "TestHelperDialAs", "PICOMETER_HELPER_SOCKET="+s.cfg.Socket)
		if err != nil {
			t.Fatalf("helper as uid 65534: %v\n%s", err, out)
		}
		if allowed {
			waitApplied(t, s.Agg, kindHello, 1)
			continue
		}
		waitFor(t, func() bool { return rejected(t, s.Agg, schema.ReasonPeerNotAllowed) == 1 })
		if got := s.Agg.self.events[kindHello].c.Get(); got != 0 {
			t.Fatalf("hellos applied from a refused peer: %d", got)
		}
		// The sidecar's own uid still connects.
		send(t, s.cfg.Socket, newSim(t, "0808080808080808", "own-uid").hello())
		waitApplied(t, s.Agg, kindHello, 1)
	}
}

// TestPrepareSocketDir: the default socket's directory is created 0700;
// one another uid made first (a squatter's), one others can write, or a
// symbolic link is refused.
func TestPrepareSocketDir(t *testing.T) {
	base := t.TempDir()
	euid := os.Geteuid()
	dir := filepath.Join(base, "picometer")
	if err := PrepareSocketDir(dir, euid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created %v, %v; want mode 0700", fi.Mode(), err)
	}
	if err := PrepareSocketDir(dir, euid); err != nil {
		t.Fatalf("existing own directory: %v", err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if err := PrepareSocketDir(open, euid); err == nil || !strings.Contains(err.Error(), "lets others write") {
		t.Fatalf("0777 directory: %v", err)
	}
	link := filepath.Join(base, "link")
	os.Symlink(dir, link)
	if err := PrepareSocketDir(link, euid); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("symbolic link: %v", err)
	}
	if euid != 0 {
		t.Skip("the squatter case needs root (to give a directory to another uid)")
	}
	squat := filepath.Join(base, "squat")
	os.Mkdir(squat, 0o700)
	os.Chown(squat, 65534, 65534)
	if err := PrepareSocketDir(squat, euid); err == nil || !strings.Contains(err.Error(), "owned by uid 65534, not by this process's uid 0") {
		t.Fatalf("squatter's directory: %v", err)
	}
}
