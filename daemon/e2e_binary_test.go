package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/testenv"
)

// picometerd returns the built binary: $PICOMETER_BIN_DIR/picometerd (make
// build), or, when PICOMETER_BIN_DIR is unset, one built into a temporary
// directory with the go tool.
func picometerd(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("PICOMETER_BIN_DIR"); dir != "" {
		bin := filepath.Join(dir, "picometerd")
		if _, err := os.Stat(bin); err != nil {
			testenv.Missing(t, "picometerd binary: %v (make build)", err)
		}
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "PICOMETER_BIN_DIR unset and no go tool to build picometerd")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "picometerd-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		bin := filepath.Join(dir, "picometerd")
		if out, err := exec.Command(goTool, "build", "-o", bin, "./cmd/picometerd").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// built is the binary built once per test binary (removed by TestMain).
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// TestE2EBinary runs picometerd as users do: flags, the tiny model, a real
// sidecar socket, then SIGTERM.
func TestE2EBinary(t *testing.T) {
	openTiny(t, nil) // skips (or fails under PICOMETER_LIVE=1) where the engine cannot run
	bin := picometerd(t)
	model := tinyModel(t)
	sock := filepath.Join(socketDir(t), "events.sock")
	sink := listenSink(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--model", model, "--listen", "127.0.0.1:0", "--metrics-socket", sock, "--b-max", "4")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var logBuf bytes.Buffer
	addrCh := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		re := regexp.MustCompile(`level=INFO msg=serving url=http://([0-9.]+:[0-9]+) `)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logBuf.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrCh <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-logDone:
		cmd.Wait()
		t.Fatalf("picometerd exited before serving: %v\n%s", cmd.ProcessState, logBuf.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("picometerd did not log its address\n%s", logBuf.String())
	}
	ts := &testServer{t: t, url: "http://" + addr, sink: sink}
	if r := ts.do("GET", "/health", ""); r.status != 200 {
		t.Fatalf("health %d %s", r.status, r.body)
	}
	c := decodeCompletionResponse(t, ts.post("/v1/completions", greedy("Hello", 20, "")).body)
	if c.Model != "tiny" || c.Usage.CompletionTokens != len(c.Choices[0].TokenIDs) {
		t.Errorf("completion %+v", c)
	}
	s := ts.stream("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":10,"stream":true}`)
	if s.status != 200 || s.data[len(s.data)-1] != "[DONE]" {
		t.Errorf("chat stream %d %q", s.status, s.data)
	}
	if r := ts.post("/v1/completions", `{"prompt":"x","max_tokens":-1}`); r.status != 400 {
		t.Errorf("bad input: %d %s", r.status, r.body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("picometerd exited with %v\n%s", err, logBuf.String())
	}
	// Nothing is logged per request at the default level: the log is the
	// start, the emitter's connection and the shutdown (in either order:
	// the emitter connects when its first event is queued), and the stop.
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(logBuf.String()), "\n") {
		msgs = append(msgs, between(line+" ", "msg=", " "))
	}
	if len(msgs) == 4 {
		slices.Sort(msgs[1:3])
	}
	if want := []string{"serving", `"emitter:`, `"shutting`, "stopped"}; !slices.Equal(msgs, want) {
		t.Errorf("log messages %q, want %q; log:\n%s", msgs, want, logBuf.String())
	}
	sink.drained()
	lines := sink.lines()
	if len(lines) != 1 {
		t.Fatalf("%d connections to the sidecar, want 1", len(lines))
	}
	evs := sink.events()
	evs = checkConnection(t, lines[0], evs[0].Boot)
	// The engine finished 2; the totals hold every request event: the 400 too.
	if last, tot := finalSnapshot(t, evs); last.RequestsFinished != 2 || tot.Requests() != 3 {
		t.Errorf("last snapshot %+v and totals of %d requests, want 2 finished and 3 in the totals", last.EngineBody, tot.Requests())
	}
	h := evs[0]
	if h.Model != "tiny" || h.Config.BMax != 4 || h.Config.ContextLength != 256 || h.PID != cmd.Process.Pid {
		t.Errorf("hello %+v", h.HelloBody)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == schema.KindRequest {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d request events, want 3", n)
	}
}

// TestBinaryHelp: --help states every flag with its real default.
func TestBinaryHelp(t *testing.T) {
	cmd := exec.Command(picometerd(t), "-h")
	// The default socket path depends on the environment and the uid: pin it.
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR=/run/user/1000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("picometerd -h: %v\n%s", err, out)
	}
	golden(t, "testdata/picometerd_help.golden", out)
}

func withFlags(c Config, model string, bMax int) Config {
	c.Model, c.Engine.BMax = model, bMax
	return c
}

func fullConfig(t *testing.T) Config {
	c, err := LoadConfig(configDir + "/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestE2EBinaryCheckConfig(t *testing.T) {
	bin := picometerd(t)
	model := tinyModel(t)
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String()
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--check-config", "--model", model, "--b-max", "3"}, 0, "# picometerd: configuration OK\n" + Describe(withFlags(DefaultConfig(), model, 3))},
		{[]string{"--check-config", "--config", configDir + "/full.toml", "--model", model}, 0, "# picometerd: configuration OK\n" + Describe(withFlags(fullConfig(t), model, 4))},
		{[]string{"--check-config", "--config", configDir + "/full.toml"}, 2, "picometerd: config: model: open /models/default.gguf: no such file or directory\n"},
		{[]string{"--check-config", "--config", configDir + "/bad_unknown_key.toml"}, 2, "picometerd: config: " + configDir + "/bad_unknown_key.toml: unknown key \"engine.bmax\"\n"},
		{[]string{"--check-config", "--model", model, "--b-max", "0"}, 2, "picometerd: config: engine.b_max: 0 not in 1..64\n"},
		{[]string{"--model", model, "--listen", "nonsense"}, 2, "picometerd: config: listen: \"nonsense\" is not host:port: missing port in address\n"},
	} {
		code, out := run(tc.args...)
		if code != tc.code || out != tc.out {
			t.Errorf("picometerd %s: exit %d, output %q\nwant exit %d, output %q", strings.Join(tc.args, " "), code, out, tc.code, tc.out)
		}
	}
}
