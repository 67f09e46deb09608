package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet: every byte is spelled as one printable rune
// in the vocabulary (the 188 printable Latin-1 bytes as themselves, the
// other 68 as U+0100.. in byte order), so "Ġ" (U+0120) is the space byte.
var (
	byteRune [256]rune      // byte → its rune in vocabulary texts
	runeByte = [324]int16{} // rune (< 324) → byte, -1 when it spells none
)

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = rune(256 + n)
			n++
		}
		runeByte[byteRune[b]] = int16(b)
	}
}

// unByteLevel turns a vocabulary text into the bytes it spells; ok is false
// when a rune is outside the byte-level alphabet (then the text is kept as
// it is, as llama.cpp does for added tokens).
func unByteLevel(s string) (b []byte, ok bool) {
	b = make([]byte, 0, len(s))
	for _, r := range s {
		if r >= int32(len(runeByte)) || runeByte[r] < 0 {
			return []byte(s), false
		}
		b = append(b, byte(runeByte[r]))
	}
	return b, true
}

// byteLevel spells raw bytes in the byte-level alphabet (mkmodel and tests).
func byteLevel(b []byte) string {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, byteRune[c])
	}
	return string(out)
}
