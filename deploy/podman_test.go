package deploy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPodmanREADME runs the README's own container lines (the sh block with
// `podman load`) with a real podman: load the image archive, start the
// daemon and the sidecar containers read-only with no flags but the
// README's, send a completion to the daemon's published port and wait for
// the sidecar's published /metrics to count it (the two containers talk
// only through the image's socket volume). Then a container limited to one
// CPU must report threads = 1 in --check-config (the cgroup quota, read
// from inside a real container), and one without a limit the CPUs it sees.
//
// Opt-in (make test-podman): PICOMETER_PODMAN=1, since a container runtime
// needs privileges a CI runner may not grant. PICOMETER_PODMAN_FLAGS adds
// flags to every `podman run`, for hosts whose sandbox refuses podman's
// defaults (the project machine: `--runtime runc --ulimit nofile=1024:1024
// --ulimit nproc=4096:4096`, as it lacks CAP_SYS_RESOURCE and runs hybrid
// cgroups, which crun refuses). Names and host ports are made unique; the
// commands are otherwise the README's, so the README cannot drift from
// what is run.
func TestPodmanREADME(t *testing.T) {
	if os.Getenv("PICOMETER_PODMAN") != "1" {
		t.Skip("opt-in: PICOMETER_PODMAN=1 (make test-podman) runs the README's podman lines")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("PICOMETER_PODMAN=1 but no podman: %v (apt-get install podman)", err)
	}
	archive := imageArchive(t)
	cmds := readmeContainerLines(t, filepath.Join("..", "README.md"))
	if len(cmds) != 3 || cmds[0][1] != "load" || cmds[1][1] != "run" || cmds[2][1] != "run" {
		t.Fatalf("README's container block: %q, want podman load and two podman runs", cmds)
	}
	extra := strings.Fields(os.Getenv("PICOMETER_PODMAN_FLAGS"))
	suffix := fmt.Sprintf("-test%d", os.Getpid())
	podmanRun := func(args ...string) (string, error) {
		out, err := exec.Command(podman, args...).CombinedOutput()
		return string(out), err
	}

	// podman load -i build/picometer.oci.tar
	load := cmds[0]
	for i, a := range load {
		if strings.HasSuffix(a, "picometer.oci.tar") {
			load[i] = archive
		}
	}
	if out, err := podmanRun(load[1:]...); err != nil {
		t.Fatalf("%q: %v\n%s", load, err, out)
	}
	var image string
	ports := map[string]string{} // container port → host address
	for _, c := range cmds[1:] {
		args := append([]string{"run"}, extra...)
		for i := 2; i < len(c); i++ {
			a := c[i]
			switch {
			case (a == "--name" || a == "--volumes-from") && i+1 < len(c):
				args = append(args, a, c[i+1]+suffix)
				i++
			case a == "-p" && i+1 < len(c):
				_, cport, _ := strings.Cut(c[i+1], ":")
				host := freeAddr(t)
				ports[cport] = host
				args = append(args, "-p", host+":"+cport)
				i++
			case strings.HasPrefix(a, "ghcr.io/") || strings.HasPrefix(a, "localhost/"):
				image = a
				args = append(args, a)
			default:
				args = append(args, a)
			}
		}
		name := ""
		for i, a := range args {
			if a == "--name" {
				name = args[i+1]
			}
		}
		t.Cleanup(func() { exec.Command(podman, "rm", "-f", "-t", "1", name).Run() })
		if out, err := podmanRun(args...); err != nil {
			t.Fatalf("podman %q: %v\n%s", args, err, out)
		}
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command(podman, "logs", name).CombinedOutput()
				t.Logf("%s log:\n%s", name, out)
			}
		})
	}
	daemon, sidecar := ports["8000"], ports["9464"]
	if daemon == "" || sidecar == "" || image == "" {
		t.Fatalf("README's runs publish %v of image %q, want ports 8000 and 9464", ports, image)
	}

	hc := &http.Client{Timeout: 10 * time.Second}
	var body []byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Post("http://"+daemon+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"hello","max_tokens":4}`))
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completion from the container's daemon in 60 s: %v %s", err, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	counted := func() float64 {
		resp, err := hc.Get("http://" + sidecar + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		var n float64
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "picometer_requests_finished_total{") && strings.Contains(line, `gen_ai_operation_name="text_completion"`) {
				var v float64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
				n += v
			}
		}
		return n
	}
	deadline = time.Now().Add(30 * time.Second)
	for counted() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar container's /metrics did not count the completion in 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The thread default follows the container's CPU quota.
	threads := func(flags ...string) string {
		args := append(append(append([]string{"run", "--rm"}, extra...), flags...), image, "--check-config")
		out, err := podmanRun(args...)
		if err != nil {
			t.Fatalf("podman %q: %v\n%s", args, err, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.TrimSpace(k) == "threads" {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no threads line in --check-config:\n%s", out)
		return ""
	}
	if got := threads("--cpus", "1"); got != "1" {
		t.Errorf("--cpus 1: threads = %s, want 1", got)
	}
	if got, want := threads(), fmt.Sprint(min(hostCPUs(t), 64)); got != want {
		t.Errorf("no CPU limit: threads = %s, want the %s CPUs the container may use", got, want)
	}
}

// hostCPUs is the number of CPUs this process may run on.
func hostCPUs(t *testing.T) int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(string(out), &n)
	return n
}

// readmeContainerLines returns the commands of the README's sh block that
// holds `podman load`, continuation lines joined, comments dropped, each
// split into words (the block has no quoting).
func readmeContainerLines(t *testing.T, path string) [][]string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case !in && l == "```sh":
			in, block = true, nil
		case in && l == "```":
			in = false
			if len(block) > 0 && strings.HasPrefix(block[0], "podman load") {
				goto found
			}
		case in:
			block = append(block, l)
		}
	}
	t.Fatalf("%s: no ```sh block starting with podman load", path)
found:
	var cmds [][]string
	cur := ""
	for _, l := range block {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if c, ok := strings.CutSuffix(l, "\\"); ok {
			cur += c + " "
			continue
		}
		cur += l
		if f := strings.Fields(cur); len(f) > 0 {
			cmds = append(cmds, f)
		}
		cur = ""
	}
	return cmds
}
