//go:build !cgo

package native

import (
	"errors"
	"strings"
	"testing"
)

// TestNoCgo: without cgo every entry point that needs the C engine or
// loader fails with ErrNoCgo, whose message says so, and nothing panics.
func TestNoCgo(t *testing.T) {
	if !strings.Contains(ErrNoCgo.Error(), "built without cgo") {
		t.Fatalf("ErrNoCgo = %q, want it to say \"built without cgo\"", ErrNoCgo)
	}
	e, err := Open("model.gguf", DefaultConfig())
	if !errors.Is(err, ErrNoCgo) || e != nil {
		t.Fatalf("Open: %v, %v; want nil, ErrNoCgo", e, err)
	}
	var z Engine
	if _, err := z.Submit([]int32{TokBOS}, Params{MaxTokens: 1}); !errors.Is(err, ErrNoCgo) {
		t.Errorf("Submit: %v", err)
	}
	if _, err := z.Step(); !errors.Is(err, ErrNoCgo) {
		t.Errorf("Step: %v", err)
	}
	if _, err := z.Cancel(1); !errors.Is(err, ErrNoCgo) {
		t.Errorf("Cancel: %v", err)
	}
	if r, w := z.Load(); r != 0 || w != 0 {
		t.Errorf("Load: %d, %d", r, w)
	}
	if err := z.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for name, err := range map[string]error{
		"ReadModelFile":    second(ReadModelFile("model.gguf")),
		"ParseModel":       second(ParseModel([]byte("GGUF"))),
		"LoadModelInfo":    second(LoadModelInfo("model.gguf")),
		"ReadModelWeights": second(ReadModelWeights("model.gguf")),
		"CompileGrammar":   second(CompileGrammar(`root ::= "a"`)),
	} {
		if !errors.Is(err, ErrNoCgo) {
			t.Errorf("%s: %v, want ErrNoCgo", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
