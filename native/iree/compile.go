package iree

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CompileFlags are iree-compile's flags for the engine's programs: the
// local CPU device, llvm-cpu code for the host CPU, and data tiling (the
// matmuls' operands packed into the CPU's tile layout), without which the
// default model's step ran about 4x slower (docs/IREE.md).
var CompileFlags = []string{
	"--iree-hal-target-device=local",
	"--iree-hal-local-target-device-backends=llvm-cpu",
	"--iree-llvmcpu-target-cpu=host",
	"--iree-opt-data-tiling",
}

// CompilerBeside returns where scripts/iree.sh puts iree-compile relative
// to the runtime library it puts at DIR/lib/libshortfin.so.
func CompilerBeside(runtimeLib string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(runtimeLib)), "compiler", "iree", "compiler", "_mlir_libs", "iree-compile")
}

// Compile returns the .vmfb iree-compile makes of src, from cacheDir when a
// previous run compiled the same source with the same compiler for the same
// CPU (the file name is a SHA-256 of the three), else compiling it (~10 s
// for the tiny model) and storing the result there. cacheDir "" compiles
// without caching. Errors name the compiler, and iree-compile's own message.
func Compile(compiler, cacheDir, src string) ([]byte, error) {
	if compiler == "" {
		return nil, errors.New("iree: no iree-compile given")
	}
	if _, err := os.Stat(compiler); err != nil {
		return nil, fmt.Errorf("iree: iree-compile: %v (make iree puts iree-compile 3.9.0 under build/iree)", err)
	}
	version, err := exec.Command(compiler, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("iree: %s --version: %v: %s", compiler, err, bytes.TrimSpace(version))
	}
	h := sha256.New()
	for _, part := range [][]byte{version, []byte(strings.Join(CompileFlags, " ")), cpuModel(), []byte(src)} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	key := hex.EncodeToString(h.Sum(nil))[:32]
	var cached string
	if cacheDir != "" {
		cached = filepath.Join(cacheDir, key+".vmfb")
		if b, err := os.ReadFile(cached); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	dir, err := os.MkdirTemp("", "picometer-iree-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "step.mlir"), filepath.Join(dir, "step.vmfb")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(compiler, append(append([]string{}, CompileFlags...), in, "-o", out)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("iree: %s: %v: %s", compiler, err, firstLines(msg, 20))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if cached != "" {
		// A cache that cannot be written only costs the next start a compile.
		if os.MkdirAll(cacheDir, 0o755) == nil {
			tmp := cached + ".tmp" + fmt.Sprint(os.Getpid())
			if os.WriteFile(tmp, b, 0o644) == nil {
				_ = os.Rename(tmp, cached)
			}
		}
	}
	return b, nil
}

// DefaultCacheDir is the user cache's picometer/iree directory, or "" when
// the user has none.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "picometer", "iree")
}

// cpuModel is /proc/cpuinfo's first "model name" and "flags" lines:
// --iree-llvmcpu-target-cpu=host compiles for that CPU, so a cache shared
// across machines keys on it.
func cpuModel() []byte {
	b, _ := os.ReadFile("/proc/cpuinfo")
	var out []byte
	for _, key := range []string{"model name", "flags"} {
		for _, l := range bytes.Split(b, []byte("\n")) {
			if bytes.HasPrefix(l, []byte(key)) {
				out = append(append(out, l...), '\n')
				break
			}
		}
	}
	return out
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}
