// Command mkmodel writes a deterministic-weight Llama model as a GGUF v3
// file (see package native/gguf/modelgen for the presets and metadata):
//
//	go run ./native/cmd/mkmodel -preset tiny -o build/models/tiny.gguf
//	go run ./native/cmd/mkmodel -preset default -o build/models/default.gguf
//
// The same flags always give the same bytes. The file is written to a
// temporary name and renamed, so a concurrent reader never sees half of it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/picometer/picometer/native/gguf/modelgen"
)

func main() {
	preset := flag.String("preset", "default", "model preset: default or tiny")
	out := flag.String("o", "", "output file (required)")
	seed := flag.Uint64("seed", 0, "weight seed (0 keeps the preset's seed)")
	tied := flag.Bool("tied", false, "omit output.weight: the logits reuse token_embd")
	f16 := flag.Bool("f16", false, "store matrices and embeddings as F16")
	flag.Parse()
	if err := run(*preset, *out, *seed, *tied, *f16); err != nil {
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
