package daemon

import "unicode/utf8"

// utf8Hold turns a stream of output bytes, delivered in arbitrary runs, into
// valid UTF-8 text without ever splitting a character: the bytes of a
// multi-byte character that is not complete yet are held until the run that
// completes it. Bytes that can never become a character are replaced by
// U+FFFD at once, one replacement per maximal subpart of an ill-formed
// sequence (the Unicode "best practice" that Python's errors="replace" and
// the WHATWG decoder follow), so nothing is held forever; [utf8Hold.Flush]
// replaces what is still held when the stream ends.
//
// The zero value is ready to use. It never allocates beyond dst.
type utf8Hold struct {
	held   [utf8.UTFMax]byte
	n      int  // bytes held (0 = between characters)
	need   int  // continuation bytes still needed
	lo, hi byte // range of the next continuation byte
}

// replacement is U+FFFD in UTF-8.
const replacement = "\uFFFD"

// Append appends the text of b to dst and returns the extended slice.
func (h *utf8Hold) Append(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if h.n > 0 {
			if c >= h.lo && c <= h.hi {
				h.held[h.n] = c
				h.n++
				h.need--
				h.lo, h.hi = 0x80, 0xBF
				if h.need == 0 {
					dst = append(dst, h.held[:h.n]...)
					h.n = 0
				}
				continue
			}
			// The held bytes are a maximal subpart: replace them and
			// look at c afresh.
			dst = append(dst, replacement...)
			h.n = 0
		}
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			continue
		}
		need, lo, hi := leadByte(c)
		if need == 0 {
			dst = append(dst, replacement...)
			continue
		}
		h.held[0] = c
		h.n, h.need, h.lo, h.hi = 1, need, lo, hi
	}
	return dst
}

// Flush appends U+FFFD for an incomplete character still held (the stream
// ended inside it) and resets h.
func (h *utf8Hold) Flush(dst []byte) []byte {
	if h.n > 0 {
		dst = append(dst, replacement...)
		h.n = 0
	}
	return dst
}

// Held reports how many bytes are held.
func (h *utf8Hold) Held() int { return h.n }

// leadByte returns, for a byte ≥ 0x80 that starts a well-formed sequence,
// the number of continuation bytes and the range of the first one (Unicode
// Table 3-7); need is 0 for a byte that cannot start a sequence.
func leadByte(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c == 0xED: // no surrogates
		return 2, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	case c == 0xF4: // up to U+10FFFF
		return 3, 0x80, 0x8F
	}
	return 0, 0, 0
}
