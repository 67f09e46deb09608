package schema

import "testing"

func TestDefaultSocketPath(t *testing.T) {
	f := func(xdg string, euid int, want string) {
		t.Helper()
		got := DefaultSocketPath(func(k string) string {
			if k == "XDG_RUNTIME_DIR" {
				return xdg
			}
			return ""
		}, euid)
		if got != want {
			t.Errorf("DefaultSocketPath(XDG_RUNTIME_DIR=%q, euid %d) = %q, want %q", xdg, euid, got, want)
		}
	}
	f("/run/user/1000", 1000, "/run/user/1000/picometer/metrics.sock")
	f("/run/user/0", 0, "/run/user/0/picometer/metrics.sock")
	f("", 0, "/run/picometer/metrics.sock")
	f("", 1000, "/tmp/picometer-1000/metrics.sock")
	f("relative/dir", 1000, "/tmp/picometer-1000/metrics.sock") // not absolute: ignored
}
