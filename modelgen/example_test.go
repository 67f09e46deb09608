package modelgen_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

// Tests elsewhere create the tiny model in a temporary directory.
func ExampleWrite() {
	dir, err := os.MkdirTemp("", "modelgen")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.Write(path, modelgen.Tiny); err != nil {
		panic(err)
	}
	f, err := native.ReadGGUF(path)
	if err != nil {
		panic(err)
	}
	name, _ := f.Get("general.name")
	fmt.Println(name, len(f.Tensors), f.Tensor("blk.1.ffn_down.weight").Dims)
	// Output: picometer-tiny 21 [172 64]
}
