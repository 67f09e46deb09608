package daemon

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/picometer/picometer/native"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./daemon -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./daemon -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// renderTokens shows tokens as text: control tokens by name, printable
// ASCII as is, other bytes as \xNN.
func renderTokens(toks []int32) string {
	var b bytes.Buffer
	for _, t := range toks {
		switch {
		case t >= 256 && t < native.VocabSize:
			b.WriteString(native.ControlTokens[t-256])
		case t == '\n':
			b.WriteString(`\n`)
		case t >= 0x20 && t < 0x7f && t != '\\':
			b.WriteByte(byte(t))
		default:
			fmt.Fprintf(&b, `\x%02x`, t)
		}
	}
	return b.String()
}

func TestChatTemplateGolden(t *testing.T) {
	cases := []struct {
		name string
		body string
	}{
		{"one user message", `{"messages":[{"role":"user","content":"Hi"}]}`},
		{"system and turns", `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"},{"role":"user","content":"and 3+3?"}]}`},
		{"developer is system", `{"messages":[{"role":"developer","content":"Rules."},{"role":"user","content":"Go"}]}`},
		{"text parts joined by newline", `{"messages":[{"role":"user","content":[{"type":"text","text":"line 1"},{"type":"text","text":"line 2"}]}]}`},
		{"utf-8 bytes", `{"messages":[{"role":"user","content":"é€😀"}]}`},
		{"empty content", `{"messages":[{"role":"user","content":""}]}`},
	}
	var out bytes.Buffer
	for _, c := range cases {
		var r genRequest
		if e := decodeChat([]byte(c.body), &r); e != nil {
			t.Fatalf("%s: %s", c.name, e.Message)
		}
		fmt.Fprintf(&out, "# %s\n%s\n%s\n\n", c.name, c.body, renderTokens(r.Prompt))
	}
	golden(t, "testdata/chat_template.golden", out.Bytes())
}
