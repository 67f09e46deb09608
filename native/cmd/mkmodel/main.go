// Command mkmodel writes a deterministic-weight Llama model as a GGUF v3
// file (see package native/gguf/modelgen for the presets and metadata):
//
//	go run ./native/cmd/mkmodel -preset tiny -o build/models/tiny.gguf
//	go run ./native/cmd/mkmodel -preset default -o build/models/default.gguf
//	go run ./native/cmd/mkmodel -preset tiny -tied -tokenizer DIR/tokenizer.json -o llama3.gguf
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

	"github.com/picometer/picometer/native/gguf/modelgen"
	"github.com/picometer/picometer/tokenizer"
)

func main() {
	preset := flag.String("preset", "default", "model preset: default or tiny")
	out := flag.String("o", "", "output file (required)")
	seed := flag.Uint64("seed", 0, "weight seed (0 keeps the preset's seed)")
	tied := flag.Bool("tied", false, "omit output.weight: the logits reuse token_embd")
	f16 := flag.Bool("f16", false, "store matrices and embeddings as F16")
	tok := flag.String("tokenizer", "", "a Hugging Face tokenizer.json whose vocabulary (and the chat template of the tokenizer_config.json beside it) the model gets")
	flag.Parse()
	err := run(*preset, *out, *seed, *tied, *f16)
	if *tok != "" && err == nil {
		err = withTokenizer(*preset, *out, *seed, *tied, *f16, *tok)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}

func run(preset, out string, seed uint64, tied, f16 bool) error {
	p, ok := modelgen.Lookup(preset)
	if !ok {
		return fmt.Errorf("-preset %q: want default or tiny", preset)
	}
	if out == "" {
		return fmt.Errorf("-o FILE is required")
	}
	if seed != 0 {
		p.Seed = seed
	}
	p.Tied, p.F16 = tied, f16
	return modelgen.Write(out, p)
}

// withTokenizer rewrites out with the vocabulary of tokenizer.json.
func withTokenizer(preset, out string, seed uint64, tied, f16 bool, tokPath string) error {
	p, _ := modelgen.Lookup(preset)
	if seed != 0 {
		p.Seed = seed
	}
	p.Tied, p.F16 = tied, f16
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
