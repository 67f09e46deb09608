// Command mkmodel writes a deterministic-weight Llama model as a GGUF v3
// file (see package modelgen for the presets and metadata):
//
//	go run ./modelgen/cmd/mkmodel -preset tiny -o build/models/tiny.gguf
//	go run ./modelgen/cmd/mkmodel -preset default -o build/models/default.gguf
//	go run ./modelgen/cmd/mkmodel -preset default -type q4_k_m -o build/models/default-q4_k_m.gguf
//	go run ./modelgen/cmd/mkmodel -preset smollm2-135m -o build/models/smollm2-135m.gguf
//
// Presets: default and tiny (the served and the test model), tiny-k, the
// real shapes smollm2-135m, qwen2.5-0.5b and llama-3.2-1b (random weights,
// the checkpoints' hyperparameters), and tiny-llama3, tiny-qwen2 and
// tiny-qwen3 (tiny models with those shapes' features, for tests). Large
// presets take a while; when stderr is a terminal mkmodel shows progress.
//
//	go run ./modelgen/cmd/mkmodel -preset tiny -tied -tokenizer DIR/tokenizer.json -o llama3.gguf
//
// -tokenizer writes a Hugging Face tokenizer.json's vocabulary (and the
// chat template and special tokens of the tokenizer_config.json beside it)
// into the file as llama.cpp's converter does, instead of the byte
// vocabulary; the vocabulary size comes from the tokenizer.
//
// The same flags always give the same bytes. The file is written to a
// temporary name and renamed, so a concurrent reader never sees half of it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/tokenizer"
)

func main() {
	preset := flag.String("preset", "default", "model preset: "+strings.Join(presets(), ", "))
	out := flag.String("o", "", "output file (required)")
	seed := flag.Uint64("seed", 0, "weight seed (0 keeps the preset's seed)")
	tied := flag.Bool("tied", false, "omit output.weight: the logits reuse token_embd")
	f16 := flag.Bool("f16", false, "store matrices and embeddings as F16 (the same as -type f16)")
	typ := flag.String("type", "", "file type: "+strings.Join(modelgen.Types, "|")+" (default f32); quantized as llama.cpp's quantize would")
	tok := flag.String("tokenizer", "", "a Hugging Face tokenizer.json whose vocabulary (and the chat template of the tokenizer_config.json beside it) the model gets")
	flag.Parse()
	err := run(*preset, *out, *seed, *tied, *f16, *typ)
	if *tok != "" && err == nil {
		err = withTokenizer(*preset, *out, *seed, *tied, *f16, *typ, *tok)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}

func run(preset, out string, seed uint64, tied, f16 bool, typ string) error {
	p, ok := modelgen.Lookup(preset)
	if !ok {
		return fmt.Errorf("-preset %q: want one of %s", preset, strings.Join(presets(), ", "))
	}
	if f16 && typ != "" && typ != "f16" {
		return fmt.Errorf("-f16 and -type %s disagree", typ)
	}
	if out == "" {
		return fmt.Errorf("-o FILE is required")
	}
	if seed != 0 {
		p.Seed = seed
	}
	p.Tied = p.Tied || tied // the real-shape presets are tied already
	p.F16, p.Type = f16, typ
	if err := p.Validate(); err != nil {
		return fmt.Errorf("-type: %w", err)
	}
	return modelgen.WriteProgress(out, p, progress(os.Stderr, out))
}

func presets() []string {
	return append([]string{"default", "tiny", "tiny-k"}, modelgen.ShapePresets...)
}

// progress returns a progress printer for w when it is a terminal, else nil.
func progress(w *os.File, out string) func(done, total int64) {
	if st, err := w.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	last := -1
	return func(done, total int64) {
		pct := int(100 * done / max(total, 1))
		if pct == last {
			return
		}
		last = pct
		fmt.Fprintf(w, "\rmkmodel: %s: %3d%% of %.1fM weights", out, pct, float64(total)/1e6)
		if done == total {
			fmt.Fprintf(w, ", writing\n")
		}
	}
}

// withTokenizer rewrites out with the vocabulary of tokenizer.json.
func withTokenizer(preset, out string, seed uint64, tied, f16 bool, typ, tokPath string) error {
	p, _ := modelgen.Lookup(preset)
	if seed != 0 {
		p.Seed = seed
	}
	p.Tied = p.Tied || tied
	p.F16, p.Type = f16, typ
	tj, err := os.ReadFile(tokPath)
	if err != nil {
		return fmt.Errorf("-tokenizer: %w", err)
	}
	cfg, err := os.ReadFile(filepath.Join(filepath.Dir(tokPath), "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("-tokenizer: %w", err)
	}
	v, err := tokenizer.FromHF(tj, cfg)
	if err != nil {
		return fmt.Errorf("-tokenizer %s: %w", tokPath, err)
	}
	return modelgen.WriteWithVocab(out, p, v)
}
