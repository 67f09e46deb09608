package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/schema"
	"github.com/picometer/picometer/sidecar"

	"github.com/picometer/picometer/internal/testenv"
)

// Chromium is Debian's chromium, the real browser the status page is
// checked in.
func chromium(t *testing.T) string {
	t.Helper()
	return testenv.Program(t, "chromium", "PICOMETER_CHROMIUM_BIN", "make deps; Debian package chromium")
}

// runChromium runs headless chromium on url with the flags this machine
// needs (no sandbox as root, no network but loopback, a fresh profile)
// and the extra arguments; it returns standard output.
func runChromium(t *testing.T, bin, url string, extra ...string) []byte {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}
	args = append(append(args, extra...), url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(extra, " "), err, errb.String())
	}
	return out.Bytes()
}

// statusTotals is the part of /api/v1/status compared with /metrics.
type statusTotals struct {
	Times   []float64 `json:"times"`
	Targets []struct {
		Model  string `json:"model"`
		Totals struct {
			Requests   uint64 `json:"requests"`
			Errors     uint64 `json:"errors"`
			Prompt     uint64 `json:"prompt_tokens"`
			Generation uint64 `json:"generation_tokens"`
		} `json:"totals"`
		Series map[string]json.RawMessage `json:"series"`
	} `json:"targets"`
}

func getStatus(c *http.Client, addr string) (statusTotals, error) {
	var s statusTotals
	resp, err := c.Get("http://" + addr + "/api/v1/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != sidecar.StatusContentType {
		return s, fmt.Errorf("/api/v1/status: HTTP %d, %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	err = json.Unmarshal(body, &s)
	return s, err
}

// lastNonNull is the newest value of a series, or -1.
func lastNonNull(raw json.RawMessage) float64 {
	var s []*float64
	if json.Unmarshal(raw, &s) != nil {
		return -1
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != nil {
			return *s[i]
		}
	}
	return -1
}

// TestLivePage starts a daemon and a sidecar, sends traffic, and loads the
// sidecar's status page in headless chromium: the rendered DOM has every
// panel and the numbers /metrics has, and a screenshot (build/status-page.png,
// 1280×800) is not blank. The JSON's totals equal /metrics' at one moment.
// PICOMETER_PAGE_TRAFFIC (a duration, default 20s) is how long traffic runs:
// make screenshot runs it longer for the README's picture, on the trained
// model (PICOMETER_PAGE_MODEL).
func TestLivePage(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	sidecarBin := testenv.Binary(t, "picometer-sidecar")
	daemonBin := testenv.Binary(t, "picometerd")
	// PICOMETER_PAGE_MODEL (make screenshot: the trained SmolLM2) serves
	// another model than the tiny one.
	model := os.Getenv("PICOMETER_PAGE_MODEL")
	if model == "" {
		model = os.Getenv("PICOMETER_TINY_MODEL")
	}
	model = testenv.File(t, "page model (PICOMETER_PAGE_MODEL, else PICOMETER_TINY_MODEL; make models)", model)
	browser := chromium(t)
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	trafficFor := 20 * time.Second
	if v := os.Getenv("PICOMETER_PAGE_TRAFFIC"); v != "" {
		if trafficFor, err = time.ParseDuration(v); err != nil {
			t.Fatalf("PICOMETER_PAGE_TRAFFIC: %v", err)
		}
	}

	dir := t.TempDir()
	sock := filepath.Join(dir, "picometer.sock")
	sidecarAddr, daemonAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	httpc := &http.Client{Timeout: 10 * time.Second}
	sc := start(t, dir, "sidecar", sidecarBin, "--socket", sock, "--listen", sidecarAddr)
	waitFor(t, 15*time.Second, "sidecar /metrics", sc, func() error { _, err := scrape(httpc, sidecarAddr); return err })
	daemon := start(t, dir, "daemon", daemonBin, "--model", model, "--listen", daemonAddr, "--metrics-socket", sock)
	waitFor(t, 30*time.Second, "daemon /health", daemon, func() error { return getOK(httpc, "http://"+daemonAddr+"/health") })
	modelName := servedModel(t, httpc, daemonAddr)

	// Traffic in waves, for trafficFor: generations, streams, aborts and
	// invalid requests (errors by type).
	sent, events, errs := 0, 0, 0
	for t0 := time.Now(); sent == 0 || time.Since(t0) < trafficFor; time.Sleep(time.Second) {
		for _, r := range drive(daemonAddr, traffic(modelName), 4) {
			sent++
			if r.req.event {
				events++
			}
			if r.err != nil || r.status != r.req.wantStatus {
				t.Fatalf("request %q: HTTP %d (want %d), err %v", r.req.name, r.status, r.req.wantStatus, r.err)
			}
			if r.req.wantStatus >= 400 && r.req.event {
				errs++
			}
		}
	}
	// One request alone, so the decode step chart has batch size 1 whatever
	// the model's speed (on the trained model the waves keep 2-4 decoding).
	for _, r := range drive(daemonAddr, traffic(modelName)[:1], 1) {
		if r.err != nil || r.status != 200 {
			t.Fatalf("solo request: HTTP %d, err %v", r.status, r.err)
		}
		sent, events = sent+1, events+1
	}
	t.Logf("sent %d requests (%d request events, %d errors) over %v", sent, events, errs, trafficFor)

	// All of it arrived, and the sampler has taken two steps since: the
	// rates and quantiles cover the traffic.
	finished := alerts.Series(schema.IDRequestsFinished, "")
	waitFor(t, 30*time.Second, "the sidecar counted every request", sc, func() error {
		m, err := scrape(httpc, sidecarAddr)
		if err == nil && m.sum(finished, nil) < float64(events) {
			err = fmt.Errorf("%s = %v of %d", finished, m.sum(finished, nil), events)
		}
		return err
	})
	var st statusTotals
	steps := 0
	waitFor(t, 4*sidecar.HistoryStep+10*time.Second, "two samples after the traffic", sc, func() error {
		st, err = getStatus(httpc, sidecarAddr)
		if err != nil {
			return err
		}
		if steps == 0 {
			steps = len(st.Times)
		}
		if len(st.Times) < steps+2 {
			return errNotYet
		}
		return nil
	})
	if len(st.Targets) != 1 || st.Targets[0].Model != modelName {
		t.Fatalf("status targets %+v, want one, model %q", st.Targets, modelName)
	}
	tg := st.Targets[0]
	for _, s := range []string{"requests_per_second", "generation_tokens_per_second", "ttft_p50_seconds", "itl_p50_seconds", "requests_running", "slots"} {
		if lastNonNull(tg.Series[s]) < 0 {
			t.Errorf("series %s has no value: %s", s, tg.Series[s])
		}
	}
	if ttft := lastNonNull(tg.Series["ttft_p50_seconds"]); !(ttft > 0 && ttft < 10) {
		t.Errorf("ttft p50 %v s, want a positive latency", ttft)
	}

	// Same numbers as /metrics, at one moment: the JSON between two equal
	// scrapes.
	var m1 metricsText
	same := false
	for try := 0; try < 20 && !same; try++ {
		var m2 metricsText
		m1, err = scrape(httpc, sidecarAddr)
		if err == nil {
			st, err = getStatus(httpc, sidecarAddr)
		}
		if err == nil {
			m2, err = scrape(httpc, sidecarAddr)
		}
		if err != nil {
			t.Fatal(err)
		}
		same = true
		for _, id := range []string{schema.IDRequestsFinished, schema.IDRequestsFailed, schema.IDPromptTokens, schema.IDGenerationTokens} {
			n := alerts.Series(id, "")
			same = same && m1.sum(n, nil) == m2.sum(n, nil)
		}
	}
	if !same {
		t.Fatal("/metrics never held still for one status read")
	}
	tg = st.Targets[0]
	for _, c := range []struct {
		id  string
		got uint64
	}{
		{schema.IDRequestsFinished, tg.Totals.Requests}, {schema.IDRequestsFailed, tg.Totals.Errors},
		{schema.IDPromptTokens, tg.Totals.Prompt}, {schema.IDGenerationTokens, tg.Totals.Generation},
	} {
		n := alerts.Series(c.id, "")
		if want := m1.sum(n, nil); float64(c.got) != want || want == 0 {
			t.Errorf("/api/v1/status %s total %d, /metrics %v", c.id, c.got, want)
		}
	}
	if tg.Totals.Errors < uint64(errs) {
		t.Errorf("status errors %d, want at least the %d invalid requests", tg.Totals.Errors, errs)
	}

	// The page as the browser builds it.
	url := "http://" + sidecarAddr + "/"
	dom := string(runChromium(t, browser, url, "--dump-dom"))
	for _, p := range []string{"requests", "ttft", "itl", "tokens", "batch", "kv", "spec-rate", "spec-len", "batch-time", "events", "health"} {
		if !strings.Contains(dom, `data-panel="`+p+`"`) {
			t.Errorf("rendered page has no %q panel", p)
		}
	}
	if !strings.Contains(dom, `data-model="`+modelName+`"`) {
		t.Errorf("rendered page does not name model %q", modelName)
	}
	// The page's requests total: between the JSON's and a later /metrics
	// (traffic has stopped; snapshots do not change requests).
	re := regexp.MustCompile(`<dd data-total="requests">(\d+)</dd>`)
	if mm := re.FindStringSubmatch(dom); mm == nil || mm[1] != strconv.FormatUint(tg.Totals.Requests, 10) {
		t.Errorf("rendered requests total %v, want %d", mm, tg.Totals.Requests)
	}
	// The TTFT by cache outcome: the traffic repeats prompts, so hits are
	// among the requests the page counts.
	if mm := regexp.MustCompile(`<dd data-total="ttft_by_cache">hit [^(]+\((\d+)\)`).FindStringSubmatch(dom); mm == nil || mm[1] == "0" {
		t.Errorf("rendered page shows no TTFT of cache hits: %v", mm)
	}
	if n := strings.Count(dom, "<path "); n < 10 {
		t.Errorf("rendered page has %d plotted lines, want at least 10", n)
	}
	if !regexp.MustCompile(`<rect [^>]*data-batch-size="1"`).MatchString(dom) {
		t.Error("no decode step time bar for batch size 1")
	}
	if !strings.Contains(dom, `data-last="`) || strings.Contains(dom, "NaN") {
		t.Error("legends have no latest values, or show NaN")
	}

	// Screenshots: desktop (kept under build/ for make screenshot and the
	// README) and phone width.
	if err := os.MkdirAll(filepath.Join(root, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, shot := range []struct {
		path string
		size string
	}{{filepath.Join(root, "build", "status-page.png"), "1280,800"}, {filepath.Join(root, "build", "status-page-phone.png"), "400,860"}} {
		os.Remove(shot.path)
		runChromium(t, browser, url, "--screenshot="+shot.path, "--window-size="+shot.size)
		checkScreenshot(t, shot.path, shot.size)
		t.Logf("screenshot %s", shot.path)
	}
}

// checkScreenshot decodes the PNG and fails when it is blank: it must have
// the requested size, many colours, a good share of non-background pixels
// and the first plot colour (#1f77b4, requests and p50 lines) somewhere.
func checkScreenshot(t *testing.T, path, size string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	b := img.Bounds()
	if got := fmt.Sprintf("%d,%d", b.Dx(), b.Dy()); got != size {
		t.Errorf("screenshot %s is %s, want %s", path, got, size)
	}
	colours := map[[3]uint32]int{}
	plot := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := [3]uint32{r >> 8, g >> 8, bl >> 8}
			colours[c]++
			if near(c, [3]uint32{0x1f, 0x77, 0xb4}) {
				plot++
			}
		}
	}
	bg, bgN := [3]uint32{}, 0
	for c, n := range colours {
		if n > bgN {
			bg, bgN = c, n
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("screenshot %s: %d colours, background %v on %.0f%% of pixels, %d pixels of the plot colour",
		filepath.Base(path), len(colours), bg, 100*float64(bgN)/float64(total), plot)
	if len(colours) < 64 || bgN > total*95/100 || plot < 100 {
		t.Errorf("screenshot %s looks blank: %d colours, background on %d of %d pixels, %d plot pixels", path, len(colours), bgN, total, plot)
	}
}

func near(a, b [3]uint32) bool {
	d := func(x, y uint32) uint32 {
		if x > y {
			return x - y
		}
		return y - x
	}
	return d(a[0], b[0]) < 24 && d(a[1], b[1]) < 24 && d(a[2], b[2]) < 24
}
