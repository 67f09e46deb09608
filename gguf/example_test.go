//go:build cgo

package gguf_test

import (
	"fmt"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
)

// A file written, and read back by the C parser. The 173 bytes of header, metadata and
// tensor info are padded to 192 (the default alignment, 32), where the
// tensor data starts; the file is padded to 224.
func Example() {
	f := &gguf.File{
		KV: []gguf.KV{
			{Key: "general.architecture", Value: "llama"},
			{Key: "tokenizer.ggml.tokens", Value: []string{"a", "b"}},
		},
		Tensors: []gguf.Tensor{
			{Name: "w", Dims: []uint64{2, 3}, Type: gguf.F32, Data: gguf.Float32Bytes([]float32{1, 2, 3, 4, 5, 6})},
		},
	}
	b, err := f.Encode()
	if err != nil {
		panic(err)
	}
	g, err := native.ParseGGUF(b) // the one parser: C's, through native
	if err != nil {
		panic(err)
	}
	arch, _ := g.Get("general.architecture")
	w, _ := g.Tensor("w").Float32s()
	fmt.Println(len(b), arch, g.DataOffset, w)
	// Output: 224 llama 192 [1 2 3 4 5 6]
}
