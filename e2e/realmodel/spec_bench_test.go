package realmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// specRun sums one (workload, spec_k) cell's requests.
type specRun struct {
	decodeTokens, draft, accepted int
	decodeS, e2eS                 float64
}

// BenchmarkSpecReal measures n-gram speculative decoding on the trained
// model, one client, on the workloads of testdata/spec_workloads.json:
// editing and summarizing a given text and refactoring given code (where the
// answer copies the prompt, so n-gram drafts pay) and ordinary chat. One
// picometerd per configuration (spec_k 0: off, 2, 4, 8; at spec_k 4 the
// n-gram minimum 1..4) serves every request, the daemons
// taking turns request by request (PICOMETER_SPEC_ROUNDS rounds, default 2);
// every greedy answer must be the same text whatever spec_k (speculation
// changes speed only). Reported per workload and spec_k: acceptance rate
// (accepted / drafted tokens), decode tokens/s (usage.extra's decode
// tokens over decode time, summed) and the speedup over spec_k 0, in the
// log, build/specreal.txt and as metrics.
func BenchmarkSpecReal(b *testing.B) {
	raw, err := os.ReadFile("testdata/spec_workloads.json")
	if err != nil {
		b.Fatal(err)
	}
	var work []prompt
	if err := json.Unmarshal(raw, &work); err != nil {
		b.Fatal(err)
	}
	rounds := 2
	if v := os.Getenv("PICOMETER_SPEC_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	// spec_k 0 (off), 2, 4, 8 at the default n-gram minimum (3), and spec_k 4
	// at minimums 1, 2 and 4: the two defaults docs/SPECULATIVE.md tunes.
	type specCfg struct{ k, nmin int }
	ks := []specCfg{{0, 3}, {2, 3}, {4, 3}, {8, 3}, {4, 1}, {4, 2}, {4, 4}}
	daemons := make([]*server, len(ks))
	for i, k := range ks {
		daemons[i] = startDaemon(b, "--spec-k", strconv.Itoa(k.k), "--spec-ngram-min", strconv.Itoa(k.nmin), "--b-max", "1")
	}
	c := &http.Client{Timeout: 5 * time.Minute}
	var names []string
	cells := map[string][]specRun{}
	for _, w := range work {
		if cells[w.Name] == nil {
			names = append(names, w.Name)
			cells[w.Name] = make([]specRun, len(ks))
		}
	}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, w := range work {
				answers := make([]string, len(ks))
				for j := range ks {
					j := (j + r) % len(ks)
					res, err := chat(c, daemons[j].addr, w.Messages, w.MaxTokens)
					if err != nil {
						b.Fatalf("%s, %+v: %v", w.Name, ks[j], err)
					}
					answers[j] = res.Content
					cell := &cells[w.Name][j]
					cell.decodeTokens += res.DecodeTokens
					cell.decodeS += res.DecodeS
					cell.e2eS += res.E2ES
					cell.draft += res.Draft
					cell.accepted += res.Accepted
				}
				for j := range ks {
					if answers[j] != answers[0] {
						b.Fatalf("%s: %+v answered %q, spec_k 0 %q", w.Name, ks[j], answers[j], answers[0])
					}
				}
			}
		}
	}
	var t strings.Builder
	fmt.Fprintf(&t, "%-10s %6s %9s %9s %9s %10s %8s\n", "workload", "spec_k", "ngram_min", "drafted", "accepted", "decode/s", "speedup")
	for _, name := range names {
		base := cells[name][0]
		for j, k := range ks {
			cell := cells[name][j]
			rate := 0.0
			if cell.draft > 0 {
				rate = float64(cell.accepted) / float64(cell.draft)
			}
			tps := float64(cell.decodeTokens) / cell.decodeS
			speedup := tps / (float64(base.decodeTokens) / base.decodeS)
			fmt.Fprintf(&t, "%-10s %6d %9d %9d %8.0f%% %10.1f %7.2fx\n", name, k.k, k.nmin, cell.draft, 100*rate, tps, speedup)
			if k.k > 0 {
				b.ReportMetric(100*rate, fmt.Sprintf("%s-k%d-n%d-accept-%%", name, k.k, k.nmin))
				b.ReportMetric(speedup, fmt.Sprintf("%s-k%d-n%d-speedup", name, k.k, k.nmin))
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	b.Log("\n" + t.String())
	if err := os.WriteFile(repoPath(b, "build", "specreal.txt"), []byte(t.String()), 0o644); err != nil {
		b.Log(err)
	}
}
