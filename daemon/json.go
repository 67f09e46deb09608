package daemon

import (
	"strconv"
	"unicode/utf8"
)

// Hand-written JSON appenders for the shapes written per streamed chunk, so
// the hot path does not allocate. Everything they write is checked by tests
// that decode it with encoding/json.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// U+2028 and U+2029 are escaped so the output is also valid JavaScript.
func appendJSONString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, replacement...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONNullString appends s as a JSON string, or null when s is empty.
func appendJSONNullString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, s)
}

// appendTokenIDs appends a JSON array of token ids.
func appendTokenIDs(dst []byte, toks []int32) []byte {
	dst = append(dst, '[')
	for i, t := range toks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(t), 10)
	}
	return append(dst, ']')
}
