// Package cgroup reads the CPU quota a Linux control group gives this
// process, so the engine's default thread count follows a container's CPU
// limit rather than the node's CPU count: a pod limited to 2 CPUs on a
// 64-core node that started 64 compute threads would be throttled by CFS
// every period, and every latency it reports would measure the throttling.
//
// I/O is apart from parsing: [CPUs] reads through an fs.FS rooted at "/"
// (os.DirFS("/") in the binaries, a fstest.MapFS in tests), and the parse
// functions are pure functions of the files' text.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
)

// Quota is a CPU bandwidth limit: Quota microseconds of CPU time per
// Period microseconds.
type Quota struct {
	Quota, Period int64
}

// CPUs is the whole number of CPUs the quota allows: ceil(Quota/Period),
// at least 1.
func (q Quota) CPUs() int {
	n := q.Quota / q.Period
	if q.Quota%q.Period != 0 {
		n++
	}
	if n < 1 {
		return 1
	}
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}

// ParseCPUMax parses cgroup v2's cpu.max ("QUOTA PERIOD", or "max PERIOD"
// when there is no limit). ok is false for "max".
func ParseCPUMax(data string) (q Quota, ok bool, err error) {
	f := strings.Fields(data)
	if len(f) < 1 || len(f) > 2 {
		return Quota{}, false, fmt.Errorf("cpu.max: %q is not \"QUOTA PERIOD\"", strings.TrimSpace(data))
	}
	period := int64(100000) // the kernel's default when only the quota is written
	if len(f) == 2 {
		if period, err = strconv.ParseInt(f[1], 10, 64); err != nil || period <= 0 {
			return Quota{}, false, fmt.Errorf("cpu.max: period %q is not a positive integer", f[1])
		}
	}
	if f[0] == "max" {
		return Quota{}, false, nil
	}
	quota, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return Quota{}, false, fmt.Errorf("cpu.max: quota %q is not \"max\" nor a positive integer", f[0])
	}
	return Quota{quota, period}, true, nil
}

// ParseCFS parses cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us.
// ok is false when the quota is -1 (no limit).
func ParseCFS(quotaText, periodText string) (q Quota, ok bool, err error) {
	quota, err := strconv.ParseInt(strings.TrimSpace(quotaText), 10, 64)
	if err != nil {
		return Quota{}, false, fmt.Errorf("cpu.cfs_quota_us: %q is not an integer", strings.TrimSpace(quotaText))
	}
	period, err := strconv.ParseInt(strings.TrimSpace(periodText), 10, 64)
	if err != nil || period <= 0 {
		return Quota{}, false, fmt.Errorf("cpu.cfs_period_us: %q is not a positive integer", strings.TrimSpace(periodText))
	}
	if quota < 0 {
		return Quota{}, false, nil
	}
	if quota == 0 {
		return Quota{}, false, fmt.Errorf("cpu.cfs_quota_us: 0 is not a quota")
	}
	return Quota{quota, period}, true, nil
}

// Paths are the process's cgroups as /proc/self/cgroup lists them: the
// unified (v2) hierarchy's path and the v1 cpu controller's, "" when absent.
type Paths struct {
	V2, V1CPU string
}

// ParseProcCgroup parses /proc/self/cgroup ("ID:CONTROLLERS:PATH" lines).
func ParseProcCgroup(data string) Paths {
	var p Paths
	for _, line := range strings.Split(data, "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, dir, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(dir, "/") {
			continue
		}
		if id == "0" && ctrls == "" {
			p.V2 = dir
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "cpu" {
				p.V1CPU = dir
			}
		}
	}
	return p
}

// Limit is the quota in force and the file it came from.
type Limit struct {
	Quota
	File string // the file read, relative to the root given to CPUs
}

// CPUs returns the tightest CPU quota that applies to this process, read
// through root (a file system rooted at "/"): cgroup v2's cpu.max and
// cgroup v1's cpu.cfs_quota_us, in the process's own cgroup and each of its
// ancestors up to the mount point (a parent's limit binds its children; in
// a container with a cgroup namespace the process's cgroup is the mount
// root). ok is false when no quota applies or /proc/self/cgroup is absent
// (not Linux); err reports a quota file that exists but does not parse.
func CPUs(root fs.FS) (l Limit, ok bool, err error) {
	data, rerr := fs.ReadFile(root, "proc/self/cgroup")
	if rerr != nil {
		return Limit{}, false, nil
	}
	p := ParseProcCgroup(string(data))
	var errs []error
	take := func(q Quota, file string) {
		if !ok || float64(q.Quota)/float64(q.Period) < float64(l.Quota.Quota)/float64(l.Period) {
			l, ok = Limit{q, file}, true
		}
	}
	if p.V2 != "" {
		for _, dir := range ancestors("sys/fs/cgroup", p.V2) {
			file := path.Join(dir, "cpu.max")
			text, rerr := fs.ReadFile(root, file)
			if rerr != nil {
				continue
			}
			q, lim, perr := ParseCPUMax(string(text))
			if perr != nil {
				errs = append(errs, fmt.Errorf("/%s: %w", file, perr))
			} else if lim {
				take(q, file)
			}
		}
	}
	if p.V1CPU != "" {
		for _, mount := range []string{"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpuacct,cpu"} {
			for _, dir := range ancestors(mount, p.V1CPU) {
				qf, pf := path.Join(dir, "cpu.cfs_quota_us"), path.Join(dir, "cpu.cfs_period_us")
				qt, qerr := fs.ReadFile(root, qf)
				pt, perr := fs.ReadFile(root, pf)
				if qerr != nil || perr != nil {
					continue
				}
				q, lim, cerr := ParseCFS(string(qt), string(pt))
				if cerr != nil {
					errs = append(errs, fmt.Errorf("/%s: %w", dir, cerr))
				} else if lim {
					take(q, qf)
				}
			}
		}
	}
	return l, ok, errors.Join(errs...)
}

// ancestors returns mount/dir and each of its parents up to mount, deepest
// first.
func ancestors(mount, dir string) []string {
	dir = path.Clean("/" + dir)
	var out []string
	for {
		out = append(out, path.Join(mount, dir))
		if dir == "/" {
			return out
		}
		dir = path.Dir(dir)
	}
}
