package cgroup

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCPUMax(t *testing.T) {
	f := func(in string, want Quota, wantOK bool, wantErr string) {
		t.Helper()
		q, ok, err := ParseCPUMax(in)
		if got := errText(err); got != wantErr || q != want || ok != wantOK {
			t.Errorf("ParseCPUMax(%q) = %v, %v, %q; want %v, %v, %q", in, q, ok, got, want, wantOK, wantErr)
		}
	}
	f("max 100000\n", Quota{}, false, "")
	f("200000 100000\n", Quota{200000, 100000}, true, "")
	f("150000 100000", Quota{150000, 100000}, true, "")
	f("50000", Quota{50000, 100000}, true, "")
	f("", Quota{}, false, `cpu.max: "" is not "QUOTA PERIOD"`)
	f("1 2 3", Quota{}, false, `cpu.max: "1 2 3" is not "QUOTA PERIOD"`)
	f("max 0", Quota{}, false, `cpu.max: period "0" is not a positive integer`)
	f("-5 100000", Quota{}, false, `cpu.max: quota "-5" is not "max" nor a positive integer`)
	f("lots 100000", Quota{}, false, `cpu.max: quota "lots" is not "max" nor a positive integer`)
}

func TestParseCFS(t *testing.T) {
	f := func(quota, period string, want Quota, wantOK bool, wantErr string) {
		t.Helper()
		q, ok, err := ParseCFS(quota, period)
		if got := errText(err); got != wantErr || q != want || ok != wantOK {
			t.Errorf("ParseCFS(%q, %q) = %v, %v, %q; want %v, %v, %q", quota, period, q, ok, got, want, wantOK, wantErr)
		}
	}
	f("-1\n", "100000\n", Quota{}, false, "")
	f("100000\n", "100000\n", Quota{100000, 100000}, true, "")
	f("250000", "100000", Quota{250000, 100000}, true, "")
	f("x", "100000", Quota{}, false, `cpu.cfs_quota_us: "x" is not an integer`)
	f("100", "0", Quota{}, false, `cpu.cfs_period_us: "0" is not a positive integer`)
	f("0", "100000", Quota{}, false, `cpu.cfs_quota_us: 0 is not a quota`)
}

func TestQuotaCPUs(t *testing.T) {
	f := func(q Quota, want int) {
		t.Helper()
		if got := q.CPUs(); got != want {
			t.Errorf("%v.CPUs() = %d, want %d", q, got, want)
		}
	}
	f(Quota{100000, 100000}, 1)
	f(Quota{150000, 100000}, 2) // ceil
	f(Quota{200000, 100000}, 2)
	f(Quota{1000, 100000}, 1) // at least 1
	f(Quota{6400000, 100000}, 64)
}

func TestParseProcCgroup(t *testing.T) {
	f := func(in string, want Paths) {
		t.Helper()
		if got := ParseProcCgroup(in); got != want {
			t.Errorf("ParseProcCgroup(%q) = %+v, want %+v", in, got, want)
		}
	}
	f("0::/\n", Paths{V2: "/"})
	f("0::/kubepods/pod1/ctr\n", Paths{V2: "/kubepods/pod1/ctr"})
	// A hybrid host (this one): v1 controllers and an empty unified tree.
	f("9:name=systemd:/\n4:memory:/x\n2:cpuacct:/\n1:cpu:/\n0::/\n", Paths{V2: "/", V1CPU: "/"})
	f("4:cpu,cpuacct:/docker/abc\n", Paths{V1CPU: "/docker/abc"})
	f("", Paths{})
	f("garbage\n1:cpu\n", Paths{})
}

// TestCPUs reads literal cgroup trees: v2 and v1, a limit on an ancestor,
// "max", missing files and a malformed one.
func TestCPUs(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	cases := []struct {
		name    string
		fs      fstest.MapFS
		want    Limit
		wantOK  bool
		wantErr string
	}{
		{"v2 one cpu", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("100000 100000\n"),
		}, Limit{Quota{100000, 100000}, "sys/fs/cgroup/cpu.max"}, true, ""},
		{"v2 max", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("max 100000\n"),
		}, Limit{}, false, ""},
		{"v2 ancestor binds", fstest.MapFS{
			"proc/self/cgroup":                 file("0::/pod/ctr\n"),
			"sys/fs/cgroup/pod/ctr/cpu.max":    file("max 100000\n"),
			"sys/fs/cgroup/pod/cpu.max":        file("250000 100000\n"),
			"sys/fs/cgroup/cpu.max.effective":  file("ignored"),
			"sys/fs/cgroup/pod/ctr/cpu.weight": file("100"),
		}, Limit{Quota{250000, 100000}, "sys/fs/cgroup/pod/cpu.max"}, true, ""},
		{"v2 tightest wins", fstest.MapFS{
			"proc/self/cgroup":              file("0::/pod/ctr\n"),
			"sys/fs/cgroup/pod/ctr/cpu.max": file("50000 100000\n"),
			"sys/fs/cgroup/pod/cpu.max":     file("400000 100000\n"),
		}, Limit{Quota{50000, 100000}, "sys/fs/cgroup/pod/ctr/cpu.max"}, true, ""},
		{"v2 missing cpu.max", fstest.MapFS{
			"proc/self/cgroup": file("0::/\n"),
		}, Limit{}, false, ""},
		{"v1 cpu", fstest.MapFS{
			"proc/self/cgroup":                      file("2:cpuacct:/\n1:cpu:/\n0::/\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":    file("300000\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us":   file("100000\n"),
			"sys/fs/cgroup/unified/cgroup.procs":    file("1\n"),
			"sys/fs/cgroup/memory/memory.max_usage": file("1\n"),
		}, Limit{Quota{300000, 100000}, "sys/fs/cgroup/cpu/cpu.cfs_quota_us"}, true, ""},
		{"v1 cpu,cpuacct nested", fstest.MapFS{
			"proc/self/cgroup": file("3:cpu,cpuacct:/docker/abc\n"),
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  file("150000\n"),
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": file("100000\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":             file("-1\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us":            file("100000\n"),
		}, Limit{Quota{150000, 100000}, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"}, true, ""},
		{"v1 no limit", fstest.MapFS{
			"proc/self/cgroup":                    file("1:cpu:/\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("-1\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, Limit{}, false, ""},
		{"v1 missing files", fstest.MapFS{
			"proc/self/cgroup": file("1:cpu:/\n"),
		}, Limit{}, false, ""},
		{"no proc (not linux)", fstest.MapFS{}, Limit{}, false, ""},
		{"malformed cpu.max is reported, others still read", fstest.MapFS{
			"proc/self/cgroup":                    file("1:cpu:/\n0::/\n"),
			"sys/fs/cgroup/cpu.max":               file("lots\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("200000\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, Limit{Quota{200000, 100000}, "sys/fs/cgroup/cpu/cpu.cfs_quota_us"}, true,
			`/sys/fs/cgroup/cpu.max: cpu.max: quota "lots" is not "max" nor a positive integer`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, ok, err := CPUs(c.fs)
			if l != c.want || ok != c.wantOK || errText(err) != c.wantErr {
				t.Errorf("CPUs = %+v, %v, %q; want %+v, %v, %q", l, ok, errText(err), c.want, c.wantOK, c.wantErr)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzParse holds the parsers to their contract on any bytes: no panic, and
// a quota they accept allows at least one CPU.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"max 100000", "150000 100000", "50000", "", "0::/\n1:cpu:/x\n", "-1"} {
		f.Add(s, "100000")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if q, ok, err := ParseCPUMax(a); ok && (err != nil || q.CPUs() < 1) {
			t.Fatalf("ParseCPUMax(%q) = %v, %v, %v", a, q, ok, err)
		}
		if q, ok, err := ParseCFS(a, b); ok && (err != nil || q.CPUs() < 1) {
			t.Fatalf("ParseCFS(%q, %q) = %v, %v, %v", a, b, q, ok, err)
		}
		p := ParseProcCgroup(a)
		if (p.V2 != "" && !strings.HasPrefix(p.V2, "/")) || (p.V1CPU != "" && !strings.HasPrefix(p.V1CPU, "/")) {
			t.Fatalf("ParseProcCgroup(%q) = %+v", a, p)
		}
	})
}
