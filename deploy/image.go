package deploy

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout: both binaries at the root, the default model under
// /models, run as a fixed non-root user (the Deployment's runAsUser).
const (
	ImageDaemon       = "/picometerd"
	ImageSidecar      = "/picometer-sidecar"
	ImageModel        = "/models/default.gguf"
	ImageUser         = "65532:65532"
	ImageDaemonListen = "0.0.0.0:8000"
	// ImageRuntimeDir is the image's XDG_RUNTIME_DIR: both programs'
	// default socket is then ImageSocketDir/metrics.sock
	// (schema.DefaultSocketPath). ImageSocketDir ships empty, owned by
	// ImageUser with mode 0700 (what the sidecar requires of its default
	// socket directory), and is the image's one VOLUME: the only writable
	// path under a read-only root, shared by the daemon's and the sidecar's
	// containers.
	ImageRuntimeDir = "/run"
	ImageSocketDir  = "/run/picometer"
	imageUID        = 65532
)

// ImageSpec says what goes into the image.
type ImageSpec struct {
	// Daemon and Sidecar are the statically linked binaries (make image
	// builds them: picometerd with cgo and -extldflags -static, the
	// sidecar with CGO_ENABLED=0).
	Daemon, Sidecar string
	// Model is the GGUF file installed at ImageModel, the daemon's default
	// model in the image. Empty: none (mount one there).
	Model string
	// Ref is the image reference recorded in the archive
	// (org.opencontainers.image.ref.name), e.g. "ghcr.io/picometer/picometer:0.1.0",
	// the base Deployment's image and `make image`'s default.
	Ref string
}

// Image builds the image: FROM scratch, one layer with the binaries, one
// with the socket directory (ImageSocketDir, a VOLUME), one with the
// model (so a new model does not re-ship the binaries), an OCI manifest
// and config. The entrypoint is picometerd with -model set, so a pod's
// args (listen address, socket) keep the model; the default command
// listens on ImageDaemonListen (all interfaces: a loopback address is
// unreachable from outside a container). The sidecar's container sets its
// command to ImageSidecar; with no flags it listens on loopback (its
// built-in default), so a run line that publishes its port passes
// -listen. With no flags both use ImageSocketDir/metrics.sock (through
// XDG_RUNTIME_DIR). Every timestamp is the Unix epoch: the same inputs
// give the same digest.
func Image(spec ImageSpec) (v1.Image, error) {
	bins, err := fileLayer(map[string]string{ImageDaemon: spec.Daemon, ImageSidecar: spec.Sidecar}, 0o755)
	if err != nil {
		return nil, err
	}
	adds := []mutate.Addendum{{Layer: bins, History: v1.History{CreatedBy: "picometerd, picometer-sidecar (static)"}}}
	dir, err := socketDirLayer()
	if err != nil {
		return nil, err
	}
	adds = append(adds, mutate.Addendum{Layer: dir, History: v1.History{CreatedBy: "socket directory " + ImageSocketDir}})
	if spec.Model != "" {
		m, err := fileLayer(map[string]string{ImageModel: spec.Model}, 0o444)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: m, History: v1.History{CreatedBy: "default model"}})
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Entrypoint = []string{ImageDaemon, "-model=" + ImageModel}
	cf.Config.Cmd = []string{"-listen=" + ImageDaemonListen}
	cf.Config.User = ImageUser
	cf.Config.Env = []string{"XDG_RUNTIME_DIR=" + ImageRuntimeDir}
	cf.Config.Volumes = map[string]struct{}{ImageSocketDir: {}}
	cf.Config.ExposedPorts = map[string]struct{}{"8000/tcp": {}, "9464/tcp": {}}
	cf.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/picometer/picometer"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: time.Unix(0, 0).UTC()})
}

// socketDirLayer is a layer holding ImageRuntimeDir (root's, 0755) and
// the empty ImageSocketDir (the image user's, 0700). Docker and Podman
// copy the directory's owner and mode into the volume they create for it.
func socketDirLayer() (v1.Layer, error) {
	b := socketDirTar()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func socketDirTar() []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(ImageRuntimeDir, "/") + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX},
		{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(ImageSocketDir, "/") + "/", Mode: 0o700, Uid: imageUID, Gid: imageUID, ModTime: epoch, Format: tar.FormatPAX},
	} {
		if err := tw.WriteHeader(h); err != nil {
			panic(err) // writing headers to a bytes.Buffer cannot fail
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// fileLayer is a gzipped OCI layer holding each source file at its image
// path (with its parent directories), owned by root, with mode.
func fileLayer(files map[string]string, mode int64) (v1.Layer, error) {
	for _, src := range files {
		if _, err := os.Stat(src); err != nil {
			return nil, err
		}
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeFiles(pw, files, mode)) }()
		return pr, nil
	}, tarball.WithMediaType(types.OCILayer))
}

func writeFiles(w io.Writer, files map[string]string, mode int64) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	epoch := time.Unix(0, 0)
	for _, name := range names {
		for d := path.Dir(name); d != "/"; d = path.Dir(d) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/",
				Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		f, err := os.Open(files[name])
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"), Size: st.Size(),
			Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteOCIArchive writes img as an OCI image layout (index.json,
// oci-layout, blobs/) in one tar file at out: what `podman load`,
// `skopeo copy oci-archive:…` and Docker ≥ 25's `docker load` read.
func WriteOCIArchive(out string, img v1.Image, ref string) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := tarDir(f, dir); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// tarDir writes the files under dir into a tar stream, paths relative to
// dir, in lexical order, with epoch timestamps.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		h.Typeflag, h.Size, h.Mode = tar.TypeReg, st.Size(), 0o644
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ReadOCIArchive opens the one image of an OCI archive written by
// WriteOCIArchive, unpacking the layout into dir.
func ReadOCIArchive(archive, dir string) (v1.Image, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("%s: entry %q escapes the layout", archive, h.Name)
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, err
			}
			out, err := os.Create(dst)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(out, tr)
			out.Close()
			if err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: entry %q of type %c", archive, h.Name, h.Typeflag)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d manifests, want 1", archive, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
