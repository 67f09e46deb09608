package deploy

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageArchive returns the archive make image writes (PICOMETER_IMAGE, or
// ../build/picometer.oci.tar).
func imageArchive(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PICOMETER_IMAGE")
	if p == "" {
		p = filepath.Join("..", "build", "picometer.oci.tar")
	}
	if _, err := os.Stat(p); err != nil {
		missing(t, "image archive: %v (make image writes it)", err)
	}
	return p
}

// TestImageArchive opens the archive make image wrote, checks its OCI
// manifest and config, unpacks its filesystem and runs both binaries from
// it: as root, chrooted into the unpacked layers (no libc, no /etc: the
// binaries must be static) as the image's non-root user, with the image's
// entrypoint and default model; the daemon's events reach the sidecar over
// a socket in /run/picometer, as in the pod.
func TestImageArchive(t *testing.T) {
	archive := imageArchive(t)
	img, err := ReadOCIArchive(archive, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ImageDaemon, "-model=" + ImageModel}
	if !slices.Equal(cf.Config.Entrypoint, want) || cf.Config.User != ImageUser || cf.OS != "linux" {
		t.Errorf("config entrypoint %q user %q os %q, want %q %q linux", cf.Config.Entrypoint, cf.Config.User, cf.OS, want, ImageUser)
	}
	if !slices.Equal(cf.Config.Env, []string{"XDG_RUNTIME_DIR=" + ImageRuntimeDir}) {
		t.Errorf("config env %q, want XDG_RUNTIME_DIR=%s (the default socket then lands in %s)", cf.Config.Env, ImageRuntimeDir, ImageSocketDir)
	}
	if _, ok := cf.Config.Volumes[ImageSocketDir]; !ok || len(cf.Config.Volumes) != 1 {
		t.Errorf("config volumes %v, want %s only", cf.Config.Volumes, ImageSocketDir)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if mt, _ := l.MediaType(); mt != types.OCILayer {
			t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
		}
	}

	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // "/" for the image's user
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	files, owners := extract(t, rc, root)
	rc.Close()
	// Read-only root: the image's user owns its socket directory (0700,
	// as the sidecar requires of a default one) and nothing else.
	sockDir := strings.TrimPrefix(ImageSocketDir, "/") + "/"
	for name, o := range owners {
		if want := [2]int{0, 0}; name == sockDir {
			if o != [2]int{imageUID, imageUID} {
				t.Errorf("%s owned by %v, want %d:%d", name, o, imageUID, imageUID)
			}
		} else if o != want {
			t.Errorf("%s owned by %v, want root", name, o)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, ImageSocketDir)); err != nil {
		t.Errorf("%s not in the image: %v", ImageSocketDir, err)
	} else if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s in the image: %v, want a directory of mode 0700", ImageSocketDir, fi.Mode())
	}
	wantFiles := []string{"models/default.gguf", "picometer-sidecar", "picometerd"}
	if !slices.Equal(files, wantFiles) {
		t.Fatalf("image files %v, want %v (FROM scratch)", files, wantFiles)
	}
	for _, bin := range []string{"picometerd", "picometer-sidecar"} {
		checkStatic(t, filepath.Join(root, bin))
	}

	if os.Geteuid() != 0 {
		missing(t, "running the image needs root (chroot, uid 65532, a network namespace)")
	}
	// As a container runtime would: chrooted, as the image's user, with
	// the image's environment, in a network namespace of its own (the
	// pod's), the image's VOLUME as shipped (no flags name a socket).
	ns := newNetns(t)
	run := func(args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		cmd.Dir = "/"
		cmd.Env = cf.Config.Env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := ns.start(cmd); err != nil {
			t.Fatalf("start %s: %v", args[0], err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s output:\n%s", args[0], out.String())
			}
		})
		return cmd
	}
	hc := ns.client()
	waitUp := func(url string, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			resp, err := hc.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not healthy after %v: %v", url, timeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The sidecar with no flags: its built-in listen address, the image's
	// socket directory through XDG_RUNTIME_DIR.
	sAddr := "127.0.0.1:9464"
	run(ImageSidecar)
	waitUp("http://"+sAddr+"/health", 30*time.Second)
	// The daemon as `docker run IMAGE` starts it: entrypoint and command.
	dAddr := "127.0.0.1:" + ImageDaemonListen[strings.LastIndexByte(ImageDaemonListen, ':')+1:]
	run(append(slices.Clone(cf.Config.Entrypoint), cf.Config.Cmd...)...)
	waitUp("http://"+dAddr+"/health", 60*time.Second)
	if _, err := os.Stat(filepath.Join(root, ImageSocketDir, "metrics.sock")); err != nil {
		t.Errorf("the default socket is not in the image's socket directory: %v", err)
	}

	resp, err := hc.Post("http://"+dAddr+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"hello","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion from the image's daemon: %s %s", resp.Status, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := hc.Get("http://" + sAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(m), "gen_ai_server_request_duration_seconds_count{") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar never counted the daemon's request:\n%.2000s", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// extract unpacks a filesystem tar into root, with the entries' modes and
// (as root) owners, and returns its regular files, sorted, and every
// entry's owner (directories with a trailing slash).
func extract(t *testing.T, r io.Reader, root string) ([]string, map[string][2]int) {
	t.Helper()
	tr := tar.NewReader(r)
	var files []string
	owners := map[string][2]int{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("layer entry %q escapes the root", h.Name)
		}
		dst := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dst, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
			owners[name+"/"] = [2]int{h.Uid, h.Gid}
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(dst), 0o755)
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
			files = append(files, name)
			owners[name] = [2]int{h.Uid, h.Gid}
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
	}
	slices.Sort(files)
	if os.Geteuid() == 0 {
		for name, o := range owners {
			if err := os.Lchown(filepath.Join(root, name), o[0], o[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return files, owners
}

// checkStatic fails unless path is an ELF executable with no interpreter
// and no shared libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not statically linked", filepath.Base(path))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", filepath.Base(path), libs)
	}
}
