package daemon

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUTF8Hold(t *testing.T) {
	// f feeds runs one by one and checks what each call emits ("|" separates
	// the expected outputs per run; the last part is what Flush emits).
	f := func(runs []string, want string) {
		t.Helper()
		var h utf8Hold
		var got []string
		for _, r := range runs {
			got = append(got, string(h.Append(nil, []byte(r))))
		}
		got = append(got, string(h.Flush(nil)))
		if g := strings.Join(got, "|"); g != want {
			t.Errorf("runs %q: got %q, want %q", runs, g, want)
		}
	}
	const R = "\uFFFD"
	// ASCII passes straight through.
	f([]string{"abc", "def"}, "abc|def|")
	f([]string{""}, "|")
	// 2-byte é split across runs.
	f([]string{"h\xc3", "\xa9llo"}, "h|éllo|")
	// 3-byte € split 1+2 and 2+1.
	f([]string{"\xe2", "\x82\xac"}, "|€|")
	f([]string{"\xe2\x82", "\xac!"}, "|€!|")
	f([]string{"\xe2", "\x82", "\xac"}, "||€|")
	// 4-byte 😀 (F0 9F 98 80) split every way.
	f([]string{"\xf0", "\x9f\x98\x80"}, "|😀|")
	f([]string{"\xf0\x9f", "\x98\x80"}, "|😀|")
	f([]string{"\xf0\x9f\x98", "\x80"}, "|😀|")
	f([]string{"\xf0", "\x9f", "\x98", "\x80x"}, "|||😀x|")
	// Invalid bytes are replaced at once, never held.
	f([]string{"\xff"}, R+"|")
	f([]string{"a\x80b"}, "a"+R+"b|")
	f([]string{"\xc0\xaf"}, R+R+"|") // overlong
	f([]string{"\xf5\x80"}, R+R+"|") // beyond U+10FFFF
	// A truncated sequence followed by a non-continuation: one U+FFFD for
	// the maximal subpart, then the byte afresh.
	f([]string{"\xe2\x82", "A"}, "|"+R+"A|")
	f([]string{"\xe2\x82\xe2\x82\xac"}, R+"€|")
	f([]string{"\xf0\x9f\x98", "\xf0\x9f\x98\x80"}, "|"+R+"😀|")
	// Surrogates (ED A0..BF) and > U+10FFFF (F4 90..) are ill-formed at
	// the second byte: every byte is its own maximal subpart.
	f([]string{"\xed\xa0\x80"}, R+R+R+"|")
	f([]string{"\xf4\x90\x80\x80"}, R+R+R+R+"|")
	// E0 needs A0..BF next.
	f([]string{"\xe0\x80\x80"}, R+R+R+"|")
	f([]string{"\xe0\xa0\x80"}, "\u0800|")
	// The stream ends inside a character: Flush replaces what is held.
	f([]string{"ok\xe2\x82"}, "ok|"+R)
	f([]string{"\xf0\x9f"}, "|"+R)
}

// TestUTF8HoldSplitInvariance checks that for valid text every split gives
// the text back, and for any bytes every split gives the same valid text.
func TestUTF8HoldSplitInvariance(t *testing.T) {
	inputs := []string{"héllo wörld €100 😀👍🏽 中文", "a\xffb\xe2\x82c\xf0\x9f\x98", "\xed\xa0\x80\xc3"}
	for _, in := range inputs {
		var h utf8Hold
		whole := string(h.Flush(h.Append(nil, []byte(in))))
		if !utf8.ValidString(whole) {
			t.Errorf("%q: output %q is not valid UTF-8", in, whole)
		}
		if utf8.ValidString(in) && whole != in {
			t.Errorf("valid %q came out as %q", in, whole)
		}
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				var h utf8Hold
				out := h.Append(nil, []byte(in[:i]))
				out = h.Append(out, []byte(in[i:j]))
				out = h.Append(out, []byte(in[j:]))
				out = h.Flush(out)
				if string(out) != whole {
					t.Fatalf("%q split at %d,%d: got %q, want %q", in, i, j, out, whole)
				}
			}
		}
	}
}

func TestUTF8HoldAllocs(t *testing.T) {
	var h utf8Hold
	dst := make([]byte, 0, 64)
	in := []byte("h\xc3\xa9\xe2\x82")
	allocs := testing.AllocsPerRun(100, func() {
		dst = h.Append(dst[:0], in)
		dst = h.Flush(dst)
	})
	if allocs != 0 {
		t.Errorf("utf8Hold allocates %v times per run, want 0", allocs)
	}
}

func FuzzUTF8Hold(f *testing.F) {
	f.Add([]byte("héllo €"), uint8(2))
	f.Add([]byte("\xf0\x9f\x98\x80\xff\xe2\x82"), uint8(1))
	f.Add([]byte("\xed\xa0\x80"), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		var h utf8Hold
		whole := h.Flush(h.Append(nil, in))
		if !utf8.Valid(whole) {
			t.Fatalf("output %q of %q is not valid UTF-8", whole, in)
		}
		if utf8.Valid(in) && string(whole) != string(in) {
			t.Fatalf("valid input %q came out as %q", in, whole)
		}
		n := int(step%7) + 1
		var out []byte
		for i := 0; i < len(in); i += n {
			prev := len(out)
			out = h.Append(out, in[i:min(i+n, len(in))])
			if !utf8.Valid(out[prev:]) {
				t.Fatalf("run output %q is not valid UTF-8 on its own", out[prev:])
			}
			if h.Held() > 3 {
				t.Fatalf("holding %d bytes", h.Held())
			}
		}
		out = h.Flush(out)
		if string(out) != string(whole) {
			t.Fatalf("runs of %d gave %q, whole input %q", n, out, whole)
		}
	})
}
