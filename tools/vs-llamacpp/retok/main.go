// Command retok copies a GGUF file with tokenizer.ggml.model rewritten, so
// llama.cpp (which refuses picometer's "picometer-bytes" vocabulary) loads
// picometer's models: the tensors and every other key are untouched.
//
//	go run ./tools/vs-llamacpp/retok -model llama IN.gguf OUT.gguf
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
)

func main() {
	model := flag.String("model", "llama", "the new tokenizer.ggml.model")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: retok [-model NAME] IN.gguf OUT.gguf")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *model); err != nil {
		fmt.Fprintln(os.Stderr, "retok:", err)
		os.Exit(1)
	}
}

func run(in, out, model string) error {
	f, err := native.ReadGGUF(in)
	if err != nil {
		return err
	}
	found := false
	for i := range f.KV {
		if f.KV[i].Key == "tokenizer.ggml.model" {
			f.KV[i].Value, found = model, true
		}
	}
	if !found {
		return fmt.Errorf("%s: no tokenizer.ggml.model key", in)
	}
	return gguf.WriteFile(out, f)
}
