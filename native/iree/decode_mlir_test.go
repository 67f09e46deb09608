package iree

import (
	"strings"
	"testing"
)

// DecodeStepMLIR's numerics are checked through IREE against the reference
// (decode_iree_test.go, -tags iree); here, without IREE, its signature and
// its refusals.
func TestDecodeStepMLIRSignature(t *testing.T) {
	s := Shape{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 172, Vocab: 264, Context: 256, RMSEps: 1e-5}
	src, err := DecodeStepMLIR(s)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(src, "\n")
	if n := strings.Count(head, ": tensor<"); n != 5+11*s.Layers+2 {
		t.Errorf("@decode has %d arguments, want %d:\n%s", n, 5+11*s.Layers+2, head)
	}
	if !strings.Contains(head, "-> (tensor<264xf32>, tensor<256x32xf32>, tensor<256x32xf32>, tensor<256x32xf32>, tensor<256x32xf32>)") {
		t.Errorf("@decode results: %s", head)
	}
	bad := func(mut func(*Shape)) {
		t.Helper()
		b := s
		mut(&b)
		if _, err := DecodeStepMLIR(b); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
	bad(func(s *Shape) { s.KVHeads = 3 })
	bad(func(s *Shape) { s.HeadDim = 15 })
	bad(func(s *Shape) { s.Layers = 0 })
	bad(func(s *Shape) { s.KVHeads = 0 })
	bad(func(s *Shape) { s.RMSEps = 0 })
}

// StepMLIR's numerics are checked through IREE (engine_iree_test.go, -tags
// iree); here its signature, which the engine's buffer list must match.
func TestStepMLIRSignature(t *testing.T) {
	s := Shape{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 172, Vocab: 264, Context: 256, RMSEps: 1e-5}
	src, err := StepMLIR(s, 8)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(src, "\n")
	if n := strings.Count(head, ": tensor<"); n != StepArgs(s) {
		t.Errorf("@step has %d arguments, want StepArgs %d:\n%s", n, StepArgs(s), head)
	}
	if !strings.Contains(head, "%kc1: tensor<16x256x16xf32>") ||
		!strings.Contains(head, "-> (tensor<8x264xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>)") {
		t.Errorf("@step's caches or results: %s", head)
	}
	if _, err := StepMLIR(s, 0); err == nil {
		t.Error("batch 0 accepted")
	}
	s.HeadDim = 15
	if _, err := StepMLIR(s, 8); err == nil {
		t.Error("odd head dim accepted")
	}
}
