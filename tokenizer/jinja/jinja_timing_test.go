package jinja

import (
	"strings"
	"testing"
)

// hostileSources are issue 25's acceptance templates: each must fail to
// load (or load) in well under 2 s.
var hostileSources = []struct{ name, src string }{
	{"parens=1e6", "{{ " + strings.Repeat("(", 1_000_000) + "1" + strings.Repeat(")", 1_000_000) + " }}"},
	{"ifs=1e5", strings.Repeat("{% if true %}", 100_000) + strings.Repeat("{% endif %}", 100_000)},
	{"oneline=5MB", strings.Repeat("{{ x }}{% if y %}a{% endif %} ", 5<<20/30)},
}

// BenchmarkHostile: parse time of each acceptance template (ns/op is the
// time one model load spends on its template).
func BenchmarkHostile(b *testing.B) {
	for _, h := range hostileSources {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(h.src)))
			for i := 0; i < b.N; i++ {
				_, _ = Parse(h.src)
			}
		})
	}
}

// BenchmarkRenderChat: a Llama 3 style template over a 20-message chat.
func BenchmarkRenderChat(b *testing.B) {
	tpl, err := Parse(`{{- bos_token }}{%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}`)
	if err != nil {
		b.Fatal(err)
	}
	var msgs []any
	for i := 0; i < 20; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": strings.Repeat("word ", 50)})
	}
	vars := map[string]any{"messages": msgs, "bos_token": "<s>", "add_generation_prompt": true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := tpl.Render(vars); err != nil {
			b.Fatal(err)
		}
	}
}
