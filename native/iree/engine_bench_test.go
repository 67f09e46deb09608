//go:build iree && cgo

package iree

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

// BenchmarkEngineVsNative: the IREE engine and the C engine side by side in
// one run, on the tiny and the default model, b_max 8 and one compute
// thread each (IREE: one task-executor worker), the C engine without
// speculation. A round submits `batch` requests at once (16-token prompts,
// 64 greedy tokens each) and steps until all finish; the two engines
// alternate for 7 rounds and each side's median output tokens per second
// (prefill included) and their ratio are reported.
func BenchmarkEngineVsNative(b *testing.B) {
	lib, compiler := needRuntime(b)
	_, cache := tinyModel(b)
	for _, preset := range []modelgen.Preset{modelgen.Tiny, modelgen.Default} {
		path := filepath.Join(b.TempDir(), preset.Name+".gguf")
		if err := modelgen.Write(path, preset); err != nil {
			b.Fatal(err)
		}
		cfg := native.DefaultConfig()
		cfg.BMax, cfg.SpecK, cfg.Threads = 8, 0, 1
		t0 := time.Now()
		ie, err := OpenEngine(path, Options{Runtime: lib, Compiler: compiler, CacheDir: cache, Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: IREE engine open (compile or cache, weights to the device) %v", preset.Name, time.Since(t0).Round(time.Millisecond))
		ce, err := native.Open(path, cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/batch=%d", preset.Name, batch), func(b *testing.B) {
				prompts := make([][]int32, batch)
				for i := range prompts {
					for j := 0; j < 16; j++ {
						prompts[i] = append(prompts[i], int32('a'+(i*7+j)%26))
					}
				}
				round := func(e runner) float64 {
					t := time.Now()
					res := run(b, e, prompts, native.Params{MaxTokens: 64})
					n := 0
					for _, r := range res {
						n += len(r.tokens)
					}
					return float64(n) / time.Since(t).Seconds()
				}
				for i := 0; i < b.N; i++ {
					var it, nt []float64
					for r := 0; r < 7; r++ {
						it = append(it, round(ie))
						nt = append(nt, round(ce))
					}
					slices.Sort(it)
					slices.Sort(nt)
					mi, mn := it[len(it)/2], nt[len(nt)/2]
					b.ReportMetric(mi, "iree-tok/s")
					b.ReportMetric(mn, "native-tok/s")
					b.ReportMetric(mn/mi, "native/iree")
				}
			})
		}
		ie.Close()
		ce.Close()
		os.Remove(path)
	}
}
