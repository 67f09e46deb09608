package daemon

import (
	"strings"
	"testing"
)

func TestStopMatcher(t *testing.T) {
	// f feeds runs and checks the text passed on per run ("|"-joined, the
	// last part is Flush's output unless a stop string matched) and whether
	// a stop string matched.
	f := func(stops, runs []string, want string, wantMatch bool) {
		t.Helper()
		m := newStopMatcher(stops)
		var got []string
		matched := false
		for _, r := range runs {
			out, ok := m.Append(nil, []byte(r))
			got = append(got, string(out))
			matched = ok
		}
		if !matched {
			got = append(got, string(m.Flush(nil)))
		}
		if g := strings.Join(got, "|"); g != want || matched != wantMatch {
			t.Errorf("stops %q runs %q: got %q matched=%v, want %q matched=%v", stops, runs, g, matched, want, wantMatch)
		}
	}
	// No stop strings: everything passes.
	f(nil, []string{"ab", "cd"}, "ab|cd|", false)
	// A stop string inside one run: text before it, nothing after.
	f([]string{"STOP"}, []string{"abcSTOPdef"}, "abc", true)
	// Across runs: the possible prefix is held, then dropped on the match.
	f([]string{"STOP"}, []string{"abcST", "OPdef"}, "abc|", true)
	f([]string{"STOP"}, []string{"S", "T", "O", "P"}, "|||", true)
	// A held prefix that does not complete is released.
	f([]string{"STOP"}, []string{"abcST", "ART"}, "abc|START|", false)
	f([]string{"STOP"}, []string{"xSTO"}, "x|STO", false)
	// The earliest of several stop strings wins.
	f([]string{"world", "lo"}, []string{"hello world"}, "hel", true)
	f([]string{"\n\n", "User:"}, []string{"answer\n", "\nUser: hi"}, "answer|", true)
	// Multi-byte stop strings and text.
	f([]string{"€"}, []string{"cost 5", "€ each"}, "cost 5|", true)
	f([]string{"ü"}, []string{"grün"}, "gr", true)
	// Overlapping prefix: "aab" in "aaab".
	f([]string{"aab"}, []string{"aa", "ab"}, "|a", true)
	// After a match nothing more passes.
	m := newStopMatcher([]string{"x"})
	m.Append(nil, []byte("ax"))
	if out, ok := m.Append(nil, []byte("more")); len(out) != 0 || !ok {
		t.Errorf("after a match: got %q, %v", out, ok)
	}
}

func TestOverlap(t *testing.T) {
	f := func(text, stop string, want int) {
		t.Helper()
		if got := overlap([]byte(text), []byte(stop)); got != want {
			t.Errorf("overlap(%q, %q) = %d, want %d", text, stop, got, want)
		}
	}
	f("abc", "cde", 1)
	f("abcd", "cde", 2)
	f("abcde", "cde", 0) // the full match "cde" is not a proper prefix; "de", "e" are not prefixes
	f("cdecd", "cde", 2)
	f("", "x", 0)
	f("xyz", "abc", 0)
	f("aa", "aab", 2)
}
