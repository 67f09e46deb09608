// Command vsllamacpp-logits checks the Go reference forward pass (and so,
// through native's tests, the C engine) against llama.cpp itself: for each
// tiny shape preset (GQA, key_length, Llama 3 rope_freqs, qwen2 biases and
// NEOX RoPE, qwen3 q/k norms, tied embeddings) it writes the model with
// tokenizer.ggml.model "llama" (llama.cpp refuses picometer's byte
// vocabulary; tensors untouched), scores 100 tokens with llama.cpp's
// llama_decode (F32 KV cache, no flash attention, one thread) and with the
// reference, and prints the largest logit difference. It exits 1 when one
// exceeds 2e-5 of the largest logit (measured: up to 6.5e-6), and 0 with a
// message when LLAMA_CPP_DIR is unset or not built:
//
//	LLAMA_CPP_DIR=/tmp/llama.cpp go run ./native/cmd/vsllamacpp-logits
//
// LLAMA_CPP_DIR is a llama.cpp checkout built with cmake into build/ (any
// target; libllama is what is linked). Not part of make test: CI has no
// llama.cpp.
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native/internal/reference"
)

// scorer is a C program against llama.h: it writes the logits of every
// position of the tokens argv[3..] of model argv[1] to argv[2] as float32.
const scorer = `#include <stdio.h>
#include <stdlib.h>
#include "llama.h"

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	llama_backend_init();
	struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
	if (!model)
		return 1;
	int n = argc - 3;
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
	cp.n_threads = cp.n_threads_batch = 1;
	cp.type_k = cp.type_v = GGML_TYPE_F32;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx)
		return 1;
	struct llama_batch b = llama_batch_init(n, 0, 1);
	for (int i = 0; i < n; i++) {
		b.token[i] = atoi(argv[3 + i]);
		b.pos[i] = i;
		b.n_seq_id[i] = 1;
		b.seq_id[i][0] = 0;
		b.logits[i] = 1;
	}
	b.n_tokens = n;
	if (llama_decode(ctx, b))
		return 1;
	int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
	FILE *f = fopen(argv[2], "wb");
	if (!f)
		return 1;
	for (int i = 0; i < n; i++)
		fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)nv, f);
	fclose(f);
	llama_batch_free(b);
	llama_free(ctx);
	llama_model_free(model);
	return 0;
}
`

const tolerance = 2e-5 // of the largest logit

func main() {
	dir := os.Getenv("LLAMA_CPP_DIR")
	lib := filepath.Join(dir, "build", "bin")
	if _, err := os.Stat(filepath.Join(lib, "libllama.so")); dir == "" || err != nil {
		fmt.Println("vsllamacpp-logits: LLAMA_CPP_DIR is unset or has no build/bin/libllama.so; skipped")
		return
	}
	ok, err := run(dir, lib)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsllamacpp-logits:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(dir, lib string) (bool, error) {
	tmp, err := os.MkdirTemp("", "vsllamacpp-logits-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	src, bin := filepath.Join(tmp, "scorer.c"), filepath.Join(tmp, "scorer")
	if err := os.WriteFile(src, []byte(scorer), 0o644); err != nil {
		return false, err
	}
	cc := exec.Command("cc", "-O1", "-I"+filepath.Join(dir, "include"), "-I"+filepath.Join(dir, "ggml", "include"),
		src, "-o", bin, "-L"+lib, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath,"+lib)
	if out, err := cc.CombinedOutput(); err != nil {
		return false, fmt.Errorf("building the scorer: %v\n%s", err, out)
	}
	good := true
	for _, name := range []string{"tiny", "tiny-llama3", "tiny-qwen2", "tiny-qwen3"} {
		worst, scale, err := compare(name, tmp, bin)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		verdict := "ok"
		if worst > tolerance*max(1, scale) {
			verdict, good = "FAIL", false
		}
		fmt.Printf("%-12s max |llama.cpp - reference| %.2g (largest logit %.3g, %.1e of it)  %s\n",
			name, worst, scale, worst/max(1, scale), verdict)
	}
	return good, nil
}

// compare scores 100 tokens of preset name with llama.cpp and the reference.
func compare(name, tmp, bin string) (worst, scale float64, err error) {
	p, _ := modelgen.Lookup(name)
	f, err := modelgen.Build(p)
	if err != nil {
		return 0, 0, err
	}
	ref, err := reference.Load(f)
	if err != nil {
		return 0, 0, err
	}
	for i := range f.KV {
		if f.KV[i].Key == "tokenizer.ggml.model" {
			f.KV[i].Value = "llama"
		}
	}
	model, logits := filepath.Join(tmp, name+".gguf"), filepath.Join(tmp, name+".logits")
	if err := gguf.WriteFile(model, f); err != nil {
		return 0, 0, err
	}
	toks := []int32{modelgen.TokBOS}
	for len(toks) < 100 {
		toks = append(toks, int32((len(toks)*31+7)%256))
	}
	args := []string{model, logits}
	for _, t := range toks {
		args = append(args, strconv.Itoa(int(t)))
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		return 0, 0, fmt.Errorf("llama.cpp: %v\n%s", err, out)
	}
	b, err := os.ReadFile(logits)
	if err != nil {
		return 0, 0, err
	}
	if len(b) != 4*len(toks)*ref.Vocab {
		return 0, 0, fmt.Errorf("llama.cpp wrote %d bytes, want %d x %d logits", len(b), len(toks), ref.Vocab)
	}
	want, err := ref.Logits(toks)
	if err != nil {
		return 0, 0, err
	}
	for i := range toks {
		for v := 0; v < ref.Vocab; v++ {
			g := math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*ref.Vocab+v):]))
			worst = max(worst, math.Abs(float64(g-want[i][v])))
			scale = max(scale, math.Abs(float64(want[i][v])))
		}
	}
	return worst, scale, nil
}
