package daemon

import (
	"encoding/json"
	"testing"
)

func TestAppendJSONString(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		got := string(appendJSONString(nil, in))
		if got != want {
			t.Errorf("appendJSONString(%q) = %s, want %s", in, got, want)
		}
		if gotB := string(appendJSONString(nil, []byte(in))); gotB != got {
			t.Errorf("[]byte variant of %q = %s, string variant %s", in, gotB, got)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%s does not decode: %v", got, err)
		}
	}
	f("", `""`)
	f("plain", `"plain"`)
	f(`q"b\s`, `"q\"b\\s"`)
	f("a\nb\tc\r", `"a\nb\tc\r"`)
	f("\x00\x1f", `"\u0000\u001f"`)
	f("héllo €😀", `"héllo €😀"`)
	f("\u2028\u2029", `"\u2028\u2029"`)
	f("bad\xffbyte", "\"bad\uFFFDbyte\"")
	f("<tag>&", `"<tag>&"`)
}

func TestAppendJSONStringRoundTrip(t *testing.T) {
	for _, s := range []string{"", "x", "héllo\n\"€\"", "\x01\x7f", "😀\u2028"} {
		var back string
		if err := json.Unmarshal(appendJSONString(nil, s), &back); err != nil || back != s {
			t.Errorf("%q: decoded %q, %v", s, back, err)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("héllo \"quoted\" \n \x00 \xff \u2028")
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q encoded as %s, which does not decode: %v", s, out, err)
		}
		// encoding/json decodes invalid UTF-8 to U+FFFD, as we encode it.
		want, _ := json.Marshal(s)
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q: round trip %q, encoding/json's %q", s, back, wantBack)
		}
	})
}
