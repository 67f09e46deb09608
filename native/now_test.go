package native

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Now must read the clock the C engine reads (stepmetrics.c), CLOCK_MONOTONIC, so times taken in
// Go (HTTP arrival) and in C (admission, tokens) are on one clock.
func TestNowIsClockMonotonic(t *testing.T) {
	for i := 0; i < 100; i++ {
		var ts unix.Timespec
		a := Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		b := Now()
		if c := ts.Nano(); c < a || c > b {
			t.Fatalf("CLOCK_MONOTONIC %d not within Now() readings [%d, %d]", c, a, b)
		}
	}
}

func BenchmarkNow(b *testing.B) {
	var s int64
	for i := 0; i < b.N; i++ {
		s += Now()
	}
	if s == 0 {
		b.Fatal("clock stood still")
	}
}
