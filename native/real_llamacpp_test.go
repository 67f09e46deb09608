//go:build cgo

package native

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

// realText is the teacher-forced text: a ChatML conversation (the template's
// system prompt, a question, an answer written here) in the trained model's
// vocabulary, 100+ tokens of prompt and answer.
const realText = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
	"<|im_start|>user\nExplain in two sentences why the Moon shows phases, then name the brightest planet.<|im_end|>\n" +
	"<|im_start|>assistant\nThe Moon shows phases because, as it orbits the Earth, we see different parts of its " +
	"sunlit half: all of it at full moon, none at new moon. The brightest planet in the night sky is Venus, " +
	"which is often called the morning star or the evening star.<|im_end|>\n"

// llamaScores are llama.cpp's logits for one text.
type llamaScores struct {
	tokens []int32
	vocab  int
	logits []float32 // [len(tokens)][vocab]
}

// scoreWithLlamaCpp runs testdata/llamacpp_score.c, built against the
// libllama in libDir, with the KV cache in kv ("f32" or "f16").
func scoreWithLlamaCpp(t *testing.T, scorer, model, kv, text string) llamaScores {
	t.Helper()
	out := filepath.Join(t.TempDir(), "logits-"+kv)
	if b, err := exec.Command(scorer, model, out, kv, text).CombinedOutput(); err != nil {
		t.Fatalf("llamacpp_score %s: %v\n%s", kv, err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n, nv := int(binary.LittleEndian.Uint32(raw)), int(binary.LittleEndian.Uint32(raw[4:]))
	if want := 8 + 4*n + 4*n*nv; len(raw) != want {
		t.Fatalf("llamacpp_score wrote %d bytes, want %d (n %d, vocab %d)", len(raw), want, n, nv)
	}
	s := llamaScores{tokens: make([]int32, n), vocab: nv, logits: make([]float32, n*nv)}
	for i := range s.tokens {
		s.tokens[i] = int32(binary.LittleEndian.Uint32(raw[8+4*i:]))
	}
	for i := range s.logits {
		s.logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[8+4*n+4*i:]))
	}
	return s
}

// logSoftmax is the log-probabilities of one row of logits.
func logSoftmax(row []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, float64(v))
	}
	sum := 0.0
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v) - lse
	}
	return out
}

func argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}

// TestRealLogitsVsLlamaCpp scores a real conversation with the trained
// SmolLM2-135M-Instruct (Q4_1) in the engine and in llama.cpp (libllama
// built from llama-cpp-python's vendored source by scripts/llamacpp.sh),
// teacher-forced on the same token ids (llama.cpp's tokenization of the
// text), and requires:
//   - log-probs: at every position the engine's log-prob of llama.cpp's
//     (F32 KV) top-1 token, and of its top-10 tokens, within twice
//     llama.cpp's own F32-vs-F16-KV spread (the worst |difference| of those
//     same log-probs between its two runs);
//   - top-1 agreement: the engine's argmax is llama.cpp's at every position
//     but near ties (llama.cpp's top-2 margin within twice the top-1
//     tolerance: both log-probs may move by it).
func TestRealLogitsVsLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("short: builds a C program against libllama and scores the 98 MB model")
	}
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	model := os.Getenv("PICOMETER_REAL_MODEL")
	if model == "" {
		model = filepath.Join(root, "build", "models", "smollm2-135m-instruct-q4_1.gguf")
	}
	model = testenv.File(t, "the trained model (PICOMETER_REAL_MODEL; make deps runs scripts/pypi.sh)", model)
	lib := os.Getenv("PICOMETER_LLAMACPP_BIN")
	if lib == "" {
		lib = filepath.Join(root, "build", "llama.cpp-bin")
	}
	testenv.File(t, "llama.cpp's libllama (PICOMETER_LLAMACPP_BIN; make deps runs scripts/llamacpp.sh)", filepath.Join(lib, "libllama.so"))
	src := filepath.Join(root, "build", "llama.cpp")
	scorer := filepath.Join(t.TempDir(), "llamacpp_score")
	cc := exec.Command("gcc", "-O1", "-o", scorer, "testdata/llamacpp_score.c",
		"-I", filepath.Join(src, "include"), "-I", filepath.Join(src, "ggml", "include"),
		"-L"+lib, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath,"+lib)
	if b, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building the scorer: %v\n%s", err, b)
	}
	f32 := scoreWithLlamaCpp(t, scorer, model, "f32", realText)
	f16 := scoreWithLlamaCpp(t, scorer, model, "f16", realText)

	e, err := Open(model, func() Config { c := DefaultConfig(); c.BMax = 1; c.Context = 512; return c }())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Info().Vocab != f32.vocab {
		t.Fatalf("vocab %d, llama.cpp %d", e.Info().Vocab, f32.vocab)
	}
	got, err := e.score(f32.tokens)
	if err != nil {
		t.Fatal(err)
	}

	const top = 10
	n, nv := len(f32.tokens), f32.vocab
	if n < 100 {
		t.Fatalf("only %d tokens scored", n)
	}
	// Per position: the log-probs of llama.cpp's (F32 KV) top-10 tokens in
	// its F16-KV run (its own spread) and in the engine; the same for its
	// top-1 token alone; top-1 agreement.
	var spread, worst, spread1, worst1 float64
	worstAt, agree, selfAgree := 0, 0, 0
	type miss struct {
		at, engine, llama int
		margin            float64
	}
	var misses []miss
	for i := 0; i < n; i++ {
		rowL, rowP := f32.logits[i*nv:][:nv], got[i*nv:][:nv]
		lpL, lpH, lpP := logSoftmax(rowL), logSoftmax(f16.logits[i*nv:][:nv]), logSoftmax(rowP)
		best := topK(lpL, top)
		for _, v := range best {
			spread = math.Max(spread, math.Abs(lpL[v]-lpH[v]))
			if d := math.Abs(lpL[v] - lpP[v]); d > worst {
				worst, worstAt = d, i
			}
		}
		t1 := best[0]
		spread1 = math.Max(spread1, math.Abs(lpL[t1]-lpH[t1]))
		worst1 = math.Max(worst1, math.Abs(lpL[t1]-lpP[t1]))
		if argmax(f16.logits[i*nv:][:nv]) == t1 {
			selfAgree++
		}
		if p := argmax(rowP); p == t1 {
			agree++
		} else {
			misses = append(misses, miss{i, p, t1, lpL[t1] - lpL[best[1]]})
		}
	}
	// Tolerances: twice what llama.cpp differs from itself when only its KV
	// cache's precision changes (measured 2026-11-26: top-1 0.18, top-10
	// 0.66; the engine: 0.21 and 1.19, llama.cpp's Q4_1 dot products
	// quantize activations to 8 bits, the engine's do not).
	tol1, tol := 2*spread1, 2*spread
	testenv.Report(t, "native: real model vs llama.cpp on %d positions: top-1 agrees at %d (llama.cpp F32 vs F16 KV: %d); max |Δ log-prob| top-1 %.3g (tolerance %.3g), top-%d %.3g at position %d (tolerance %.3g)",
		n, agree, selfAgree, worst1, tol1, top, worst, worstAt, tol)
	for _, m := range misses {
		// A near tie may flip: each of the two log-probs may move by the
		// tolerance, so a margin within twice it.
		if m.margin > 2*tol1 {
			t.Errorf("position %d: engine's top-1 %d, llama.cpp's %d by a margin of %.3g (> %.3g)", m.at, m.engine, m.llama, m.margin, 2*tol1)
		}
	}
	if worst1 > tol1 {
		t.Errorf("top-1 log-prob differs from llama.cpp by %.3g, tolerance %.3g (2× llama.cpp's F32-vs-F16 KV spread)", worst1, tol1)
	}
	if worst > tol {
		t.Errorf("top-%d log-prob differs from llama.cpp by %.3g at position %d, tolerance %.3g (2× llama.cpp's F32-vs-F16 KV spread)", top, worst, worstAt, tol)
	}
}

// topK is the indices of the k largest values of lp, largest first.
func topK(lp []float64, k int) []int {
	idx := make([]int, 0, k)
	for v := range lp {
		pos := len(idx)
		for pos > 0 && lp[v] > lp[idx[pos-1]] {
			pos--
		}
		if pos >= k {
			continue
		}
		if len(idx) < k {
			idx = append(idx, 0)
		}
		copy(idx[pos+1:], idx[pos:len(idx)-1])
		idx[pos] = v
	}
	return idx
}
