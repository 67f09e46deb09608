package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/native"
)

// The vocabularies of llama.cpp's tokenizer test vectors that picometer
// does not tokenize, and why. Every other ggml-vocab-*.gguf with vectors
// must load and pass all of them: a vocabulary that stops loading fails
// the test instead of quietly becoming "unsupported".
var llamacppUnsupported = map[string]string{
	"bert-bge": `tokenizer.ggml.model "bert": WordPiece (WPM), not implemented`,
}

// TestLlamaCppVectors runs llama.cpp's own tokenizer test vectors
// (models/ggml-vocab-NAME.gguf with .gguf.inp and .gguf.out) the way its
// tests/test-tokenizer-0 runs them: each input is encoded with
// add_special=false and parse_special=false (no BOS/EOS; control-token
// texts stay text, user-defined tokens are matched) and its ids must equal
// the line of .out. The files come from llama-cpp-python's sdist
// (scripts/pypi.sh, build/llama.cpp) or a llama.cpp checkout named by
// LLAMA_CPP_DIR; they are MIT-licensed test data of the ggml authors and
// are read in place, never copied into this repository.
func TestLlamaCppVectors(t *testing.T) {
	dir := os.Getenv("LLAMA_CPP_DIR")
	if dir == "" {
		root, err := testenv.Root()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "build", "llama.cpp")
	}
	models := filepath.Join(dir, "models")
	inps, _ := filepath.Glob(filepath.Join(models, "ggml-vocab-*.gguf.inp"))
	if len(inps) == 0 {
		testenv.Missing(t, "llama.cpp tokenizer vectors: no %s/ggml-vocab-*.gguf.inp (make deps: scripts/pypi.sh, or LLAMA_CPP_DIR)", models)
		return
	}
	var table []string
	for _, inp := range inps {
		path := strings.TrimSuffix(inp, ".inp")
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			texts, want, err := readVocabVectors(inp, path+".out")
			if err != nil {
				t.Fatal(err)
			}
			tk, err := vectorTokenizer(path)
			if reason, ok := llamacppUnsupported[name]; ok {
				if err == nil {
					t.Errorf("listed as unsupported (%s) but loads: run its vectors", reason)
				}
				table = append(table, fmt.Sprintf("%s: unsupported: %s", name, reason))
				return
			}
			if err != nil {
				t.Fatalf("%d vectors not run: %v", len(texts), err)
			}
			pass := 0
			for i, text := range texts {
				got := tk.Encode(nil, text, false)
				if slices.Equal(got, want[i]) {
					pass++
					continue
				}
				t.Errorf("%q:\n got  %v\n want %v", text, got, want[i])
			}
			table = append(table, fmt.Sprintf("%s: %d/%d", name, pass, len(texts)))
		})
	}
	testenv.Report(t, "llama.cpp tokenizer vectors (%s): %s", models, strings.Join(table, ", "))
}

// readVocabVectors reads test-tokenizer-0's files: the inputs separated by
// "\n__ggml_vocab_test__\n", and one line of space-separated ids each.
func readVocabVectors(inp, out string) ([]string, [][]int32, error) {
	a, err := os.ReadFile(inp)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, nil, err
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(strings.TrimSuffix(string(a), sep), sep) // a final separator ends the last input
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(texts) != len(lines) {
		return nil, nil, fmt.Errorf("%s: %d inputs, %s: %d lines", inp, len(texts), out, len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, l := range lines {
		for _, f := range strings.Fields(l) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %v", out, i+1, err)
			}
			ids[i] = append(ids[i], int32(n))
		}
	}
	return texts, ids, nil
}

func vectorTokenizer(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := native.ParseGGUF(b)
	if err != nil {
		return nil, err
	}
	v, err := FromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}
