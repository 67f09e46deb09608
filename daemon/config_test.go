package daemon

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

const configDir = "../testdata/config/daemon"

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// The documented defaults (issue 4 and the field comments).
	if c.Listen != "127.0.0.1:8000" || c.Model != "build/models/default.gguf" || c.Engine.BMax != 8 || c.Engine.SpecK != 4 ||
		c.Metrics.Socket != schema.DefaultSocketPath(os.Getenv, os.Geteuid()) || c.Metrics.Queue != 65536 || c.Metrics.SnapshotInterval != time.Second ||
		len(c.APIKeys) != 0 || c.RequestTimeout != 300*time.Second || c.ShutdownGrace != 10*time.Second || c.LogLevel != "info" || !c.Compat {
		t.Errorf("defaults changed: %+v", c)
	}
}

func TestConfigFiles(t *testing.T) {
	full := DefaultConfig()
	full.Listen, full.Model, full.ModelName, full.ChatTemplate = "0.0.0.0:8100", "/models/default.gguf", "pico", "../testdata/config/daemon/chat.jinja"
	full.APIKeys = []string{"key-1", "key-2"}
	full.MaxBodyBytes = 65536
	full.RequestTimeout, full.StreamStallTimeout, full.ReadTimeout = 2*time.Minute, 30*time.Second, 10*time.Second
	full.IdleTimeout, full.ShutdownGrace, full.LogLevel = time.Minute, 5*time.Second, "debug"
	full.Compat = false
	full.StreamKeepAlive, full.CORSOrigins = 5*time.Second, []string{"http://localhost:5173", "*"}
	full.Engine = EngineConfig{BMax: 4, SpecK: 0, SpecNgramMin: 3, PrefillChunk: 32, BlockSize: 32, KVBlocks: 64, MaxWaiting: 16, Threads: 2, Kernel: "portable", Context: 2048,
		Backend: "native", IREERuntime: "/opt/iree/libshortfin.so"}
	full.Metrics = MetricsConfig{Socket: "/run/picometer/events.sock", Queue: 1024, SnapshotInterval: 500 * time.Millisecond,
		WriteTimeout: 2 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: 10 * time.Second, FlushTimeout: 3 * time.Second}
	off := DefaultConfig()
	off.Metrics.Socket = ""
	good := map[string]Config{"full.toml": full, "minimal.toml": DefaultConfig(), "metrics_off.toml": off}

	files, err := filepath.Glob(filepath.Join(configDir, "*.toml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("config files: %v, %v", files, err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseConfig(data)
			if err == nil {
				err = c.Validate()
			}
			if !strings.HasPrefix(name, "bad_") {
				want, ok := good[name]
				if !ok {
					t.Fatalf("no expectation for good config %s", name)
				}
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got  %+v\nwant %+v", c, want)
				}
				return
			}
			first, _ := bufio.NewReader(strings.NewReader(string(data))).ReadString('\n')
			want, ok := strings.CutPrefix(strings.TrimSpace(first), "# error: ")
			if !ok {
				t.Fatalf("%s: first line must be '# error: <exact message>'", name)
			}
			if err == nil {
				t.Fatalf("accepted; want error %q", want)
			}
			if err.Error() != want {
				t.Errorf("error %q\nwant    %q", err, want)
			}
		})
	}
}

// TestDescribe: --check-config prints every key, and what it prints reads
// back to the same configuration (API keys aside: they are not shown).
func TestDescribe(t *testing.T) {
	for _, name := range []string{"full.toml", "minimal.toml", "metrics_off.toml"} {
		c, err := LoadConfig(filepath.Join(configDir, name))
		if err != nil {
			t.Fatal(err)
		}
		out := Describe(c)
		back, err := ParseConfig([]byte(out))
		if err != nil {
			t.Fatalf("%s: Describe's output does not parse: %v\n%s", name, err, out)
		}
		if strings.Contains(out, "key-1") {
			t.Errorf("%s: API keys shown:\n%s", name, out)
		}
		back.APIKeys = c.APIKeys
		if !reflect.DeepEqual(back, c) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v\nfrom\n%s", name, back, c, out)
		}
	}
}

func TestLoadConfigNamesFile(t *testing.T) {
	path := filepath.Join(configDir, "bad_unknown_key.toml")
	_, err := LoadConfig(path)
	if err == nil || err.Error() != path+`: unknown key "engine.bmax"` {
		t.Errorf("got %v", err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.toml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCheckConfig(t *testing.T) {
	c := DefaultConfig()
	c.Model = filepath.Join(t.TempDir(), "none.gguf")
	if err := CheckConfig(c); err == nil || !strings.HasPrefix(err.Error(), "model: open ") {
		t.Errorf("missing model: %v", err)
	}
	c.Model = filepath.Join(configDir, "full.toml") // any readable file
	if err := CheckConfig(c); err != nil {
		t.Errorf("readable model: %v", err)
	}
	c.Engine.BMax = 0
	if err := CheckConfig(c); err == nil || err.Error() != "engine.b_max: 0 not in 1..64" {
		t.Errorf("invalid config: %v", err)
	}
}

// TestServedName: model_name, else the file's name without .gguf (whatever
// its general.name says), else general.name for an engine with no file.
func TestServedName(t *testing.T) {
	f := func(path, want string) {
		t.Helper()
		if got := FileModelName(path); got != want {
			t.Errorf("FileModelName(%q) = %q, want %q", path, got, want)
		}
	}
	f("build/models/default.gguf", "default")
	f("/models/smollm2-135m-instruct-q4_1.gguf", "smollm2-135m-instruct-q4_1")
	f("Llama-3.1-8B.Q4_K_M.GGUF", "Llama-3.1-8B.Q4_K_M")
	f("llama-3.1-8b", "llama-3.1-8b") // only .gguf goes
	f("models/.gguf", ".gguf")
	f("model.bin", "model.bin")
	f("", "")
	f("/", "")

	info := native.ModelInfo{Name: "Smollm2 135M 8k Lc100K Mix1 Ep2"}
	g := func(model, name, want string) {
		t.Helper()
		if got := servedName(Config{Model: model, ModelName: name}, info); got != want {
			t.Errorf("servedName(model %q, model_name %q) = %q, want %q", model, name, got, want)
		}
	}
	g("m/smollm2.gguf", "", "smollm2")
	g("m/smollm2.gguf", "llama3", "llama3")
	g("", "", info.Name)

	c := DefaultConfig()
	if out := Describe(c); !strings.Contains(out, "# model_name is empty: served as \"default\", the model file's name\n") {
		t.Errorf("Describe does not show the effective model name:\n%s", out)
	}
	c.ModelName = "pico"
	if out := Describe(c); strings.Contains(out, "served as") || !strings.Contains(out, "model_name = \"pico\"") {
		t.Errorf("Describe with model_name:\n%s", out)
	}
}
