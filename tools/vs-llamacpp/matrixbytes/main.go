// Command matrixbytes prints the bytes of weights one decoded token reads
// from a GGUF model, as picometer's loader counts them (every layer matrix
// and the output; of the embedding table only a row): what decode at
// batch 1 streams from memory per token.
//
//	go run ./tools/vs-llamacpp/matrixbytes MODEL.gguf
package main

import (
	"fmt"
	"os"

	"github.com/picometer/picometer/native"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: matrixbytes MODEL.gguf")
		os.Exit(2)
	}
	f, err := native.ReadModelFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrixbytes:", err)
		os.Exit(1)
	}
	fmt.Println(f.MatrixBytes)
}
