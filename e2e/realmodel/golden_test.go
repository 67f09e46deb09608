package realmodel

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from picometerd's answers")

// golden is one prompt's pinned greedy answer.
type golden struct {
	Name             string `json:"name"`
	Content          string `json:"content"`
	FinishReason     string `json:"finish_reason"`
	CompletionTokens int    `json:"completion_tokens"`
}

// TestLiveRealGolden pins picometerd's greedy chat answers on the trained
// model: each prompt of testdata/prompts.json alone, then all of them at
// once (four clients: batched decode, each with speculative drafts of its
// own), must give testdata/golden.json's text, finish reason and token
// count. The capital of France is Paris (issue 32's done-when).
func TestLiveRealGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts picometerd on the 98 MB model")
	}
	prompts := readPrompts(t)
	d := startDaemon(t)
	c := &http.Client{Timeout: 2 * time.Minute}

	got := make([]golden, len(prompts))
	for i, p := range prompts {
		r, err := chat(c, d.addr, p.Messages, p.MaxTokens)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		got[i] = golden{p.Name, r.Content, r.FinishReason, r.CompletionTokens}
	}
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile("testdata/golden.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatalf("%v (go test ./e2e/realmodel -update writes it)", err)
	}
	var want []golden
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("testdata/golden.json: %v", err)
	}
	if len(want) != len(got) {
		t.Fatalf("testdata/golden.json has %d answers for %d prompts (-update)", len(want), len(got))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s alone:\n got %+v\nwant %+v", prompts[i].Name, got[i], want[i])
		}
	}
	for i, g := range want {
		if g.Name == "capital" && !strings.Contains(g.Content, "Paris") {
			t.Errorf("the capital of France: %q has no \"Paris\"", want[i].Content)
		}
	}

	// Concurrently: four clients, every prompt once more.
	var wg sync.WaitGroup
	conc := make([]golden, len(prompts))
	errs := make([]error, len(prompts))
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := chat(c, d.addr, prompts[i].Messages, prompts[i].MaxTokens)
				conc[i], errs[i] = golden{prompts[i].Name, r.Content, r.FinishReason, r.CompletionTokens}, err
			}
		}()
	}
	for i := range prompts {
		next <- i
	}
	close(next)
	wg.Wait()
	for i := range conc {
		if errs[i] != nil {
			t.Errorf("%s concurrently: %v", prompts[i].Name, errs[i])
		} else if conc[i] != want[i] {
			t.Errorf("%s concurrently:\n got %+v\nwant %+v", prompts[i].Name, conc[i], want[i])
		}
	}
}
