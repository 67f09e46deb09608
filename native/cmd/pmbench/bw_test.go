//go:build cgo

package main

import "testing"

// TestBandwidth: the probe reads its buffer in either page size at a rate
// a memory system gives (more than 100 MB/s, less than 10 TB/s), and
// refuses what it cannot measure.
func TestBandwidth(t *testing.T) {
	for _, huge := range []bool{true, false} {
		b, err := bandwidth(1, 1, huge)
		if err != nil {
			t.Fatalf("huge %v: %v", huge, err)
		}
		if b < 1e8 || b > 1e13 {
			t.Errorf("huge %v: %.3g bytes/s", huge, b)
		}
	}
	if _, err := bandwidth(0, 1, true); err == nil {
		t.Error("0 threads: no error")
	}
}
