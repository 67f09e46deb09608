package daemon

import "bytes"

// stopMatcher enforces stop strings on streamed text. Text is appended in
// runs; the matcher passes on everything that cannot be the start of a stop
// string and holds back the longest tail that could still become one, so a
// client never receives part of a stop string. When a stop string appears
// (possibly spread over several runs), the text before it is the last text
// passed on and the matcher reports the match; text after it is discarded.
//
// Text must be valid UTF-8 (it comes out of [utf8Hold]) and stop strings are
// valid UTF-8, so a held tail always starts on a character boundary.
type stopMatcher struct {
	stops   [][]byte
	pending []byte // held tail: a proper prefix of some stop string
	matched bool
}

func newStopMatcher(stops []string) stopMatcher {
	m := stopMatcher{}
	for _, s := range stops {
		m.stops = append(m.stops, []byte(s))
	}
	return m
}

// Append appends to dst the text of run that is certain not to belong to a
// stop string and reports whether a stop string has now been seen. After a
// match, Append passes nothing more.
func (m *stopMatcher) Append(dst, run []byte) ([]byte, bool) {
	if m.matched {
		return dst, true
	}
	if len(m.stops) == 0 {
		return append(dst, run...), false
	}
	m.pending = append(m.pending, run...)
	cut := -1
	for _, s := range m.stops {
		if i := bytes.Index(m.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		dst = append(dst, m.pending[:cut]...)
		m.pending = m.pending[:0]
		m.matched = true
		return dst, true
	}
	keep := 0
	for _, s := range m.stops {
		if k := overlap(m.pending, s); k > keep {
			keep = k
		}
	}
	emit := len(m.pending) - keep
	dst = append(dst, m.pending[:emit]...)
	m.pending = append(m.pending[:0], m.pending[emit:]...)
	return dst, false
}

// Flush appends the held tail (the stream ended without completing a stop
// string) and empties it.
func (m *stopMatcher) Flush(dst []byte) []byte {
	dst = append(dst, m.pending...)
	m.pending = m.pending[:0]
	return dst
}

// overlap returns the length of the longest suffix of text that is a proper
// prefix of stop.
func overlap(text, stop []byte) int {
	k := min(len(stop)-1, len(text))
	for ; k > 0; k-- {
		if bytes.Equal(text[len(text)-k:], stop[:k]) {
			return k
		}
	}
	return 0
}
