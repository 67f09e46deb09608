package deploy

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"net/http"
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
	files := extract(t, rc, root)
	rc.Close()
	wantFiles := []string{"models/default.gguf", "picometer-sidecar", "picometerd"}
	if !slices.Equal(files, wantFiles) {
		t.Fatalf("image files %v, want %v (FROM scratch)", files, wantFiles)
	}
	for _, bin := range []string{"picometerd", "picometer-sidecar"} {
		checkStatic(t, filepath.Join(root, bin))
	}

	run := func(args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, args[0]), args[1:]...)
		if os.Geteuid() == 0 {
			uid, gid := uint32(65532), uint32(65532)
			cmd = exec.Command(args[0], args[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
			cmd.Dir = "/"
		} else {
			t.Logf("not root: running %s without chroot, paths under %s", args[0], root)
			for i, a := range cmd.Args {
				cmd.Args[i] = strings.ReplaceAll(a, "=/", "="+root+"/")
			}
		}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
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
	sock := filepath.Join(root, "run", "picometer")
	if err := os.Mkdir(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(sock, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	dAddr, sAddr := freeAddr(t), freeAddr(t)
	run(ImageSidecar, "-listen="+sAddr, "-socket=/run/picometer/picometer.sock")
	waitHealthy(t, "http://"+sAddr+"/health", 30*time.Second)
	run(append(slices.Clone(cf.Config.Entrypoint), "-listen="+dAddr, "-metrics-socket=/run/picometer/picometer.sock")...)
	waitHealthy(t, "http://"+dAddr+"/health", 60*time.Second)

	resp, err := http.Post("http://"+dAddr+"/v1/completions", "application/json",
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
		resp, err := http.Get("http://" + sAddr + "/metrics")
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

// extract unpacks a filesystem tar into root and returns its regular
// files, sorted.
func extract(t *testing.T, r io.Reader, root string) []string {
	t.Helper()
	tr := tar.NewReader(r)
	var files []string
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
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
	}
	slices.Sort(files)
	return files
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
