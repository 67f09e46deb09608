package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// checkConfig runs `picometerd --check-config` with the cgroup files of
// root and returns its [engine] threads line.
func checkConfig(t *testing.T, root fstest.MapFS, args ...string) string {
	t.Helper()
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args = append([]string{"--check-config", "--model", model}, args...)
	if code := run(args, root, &out, &errb); code != 0 {
		t.Fatalf("picometerd %v: exit %d: %s", args, code, errb.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "threads = ") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("no threads line in:\n%s", out.String())
	return ""
}

func TestCheckConfigThreadsFollowCgroupQuota(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	all := fmt.Sprintf("threads = %d", min(runtime.NumCPU(), 64))
	for _, c := range []struct {
		name string
		root fstest.MapFS
		args []string
		want string
	}{
		{"v2 one cpu", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/cpu.max": file("100000 100000\n")}, nil, "threads = 1"},
		{"v2 half a cpu", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/cpu.max": file("50000 100000\n")}, nil, "threads = 1"},
		{"v1 one cpu", fstest.MapFS{"proc/self/cgroup": file("1:cpu,cpuacct:/\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  file("100000\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": file("100000\n")}, nil, "threads = 1"},
		{"v2 max", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/cpu.max": file("max 100000\n")}, nil, all},
		{"no cgroup", fstest.MapFS{}, nil, all},
		{"flag wins", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/cpu.max": file("100000 100000\n")}, []string{"--threads", "3"}, "threads = 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkConfig(t, c.root, c.args...); got != c.want {
				t.Errorf("--check-config: %q, want %q", got, c.want)
			}
		})
	}
}

func TestThreadsFlagValidated(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--check-config", "--threads", "0"}, fstest.MapFS{}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "engine.threads: 0 not in 1..64") {
		t.Errorf("--threads 0: exit %d, %q", code, errb.String())
	}
}
