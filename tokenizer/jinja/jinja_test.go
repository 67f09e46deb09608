package jinja

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	vars := map[string]any{
		"xs": []any{"a", "b", "c"}, "s": "  hi  ", "n": int64(7), "m": map[string]any{"role": "user", "content": "x</think>y"},
	}
	f := func(src, want string) {
		t.Helper()
		tpl, err := Parse(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		got, err := tpl.Render(vars)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", src, got, want)
		}
	}
	f("{{ s | trim }}|{{ s.strip() }}|{{ s.lstrip() }}|", "hi|hi|hi  |")
	f("{{ xs[-1] }}{{ xs[1:] | join('') }}{{ xs[::-1] | join(',') }}", "cbcc,b,a")
	f("{{ 'ab'[::-1] }}{{ 'abc'[1] }}", "bab")
	f("{% for x in xs %}{{ loop.index0 }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", "0a,1b,2c")
	f("{% for x in [] %}x{% else %}empty{% endfor %}", "empty")
	f("{% set ns = namespace(k=1) %}{% for x in xs %}{% set ns.k = ns.k + 1 %}{% endfor %}{{ ns.k }}", "4")
	f("{% set k = 1 %}{% for x in xs %}{% set k = 5 %}{% endfor %}{{ k }}", "1") // loop scope
	f("{{ ('y' if n > 3 else 'n') + '!' }}", "y!")
	f("{{ m.content.split('</think>')[-1] }}{{ m['role'] }}{{ m.missing is defined }}", "yuserFalse")
	f("{{ n % 2 == 1 and 'odd' or 'even' }} {{ n // 2 }} {{ -n % 3 }}", "odd 3 2")
	f("{{ m | tojson }}", `{"content":"x\u003c/think\u003ey","role":"user"}`)
	f("{{ 'x' in xs }}{{ 'a' in xs }}{{ 'b' not in xs }}{{ s is string }}{{ n is not none }}", "FalseTrueFalseTrueTrue")
	f("a  {%- if true -%}  b  {%- endif -%}  c", "abc")
	f("{% if true %}\n  x\n{% endif %}\n", "  x\n")     // trim_blocks
	f("line\n    {% if true %}y{% endif %}", "line\ny") // lstrip_blocks
	f("{# comment #}{{ 'a' ~ 1 ~ none }}{{ xs | length }}", "a1None3")
	f("{% if n == 1 %}1{% elif n == 7 %}7{% else %}?{% endif %}", "7")
	f("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'c' %}{% break %}{% endif %}{{ x }}{% endfor %}", "a")
	f("{{ nope | default('d') }}{{ s | default('d') }}{{ 'hELLO' | capitalize }}{{ xs | first }}{{ xs | last }}{{ xs | reverse | join('') }}", "d  hi  Helloaccba")
}

func TestErrors(t *testing.T) {
	f := func(src, want string) {
		t.Helper()
		tpl, err := Parse(src)
		if err == nil {
			_, err = tpl.Render(map[string]any{"raise": Func(func(a []any, _ map[string]any) (any, error) {
				return nil, &raised{a[0].(string)}
			})})
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	f("{{ raise('no') }}", "raised no")
	f("{% macro m() %}{% endmacro %}", "{% macro %} is not supported")
	f("{% if x %}", "without {% endif %}")
	f("{{ 1 +  }}", "unexpected end")
	f("{{ x.y }}", "'y' of an undefined value")
	f("{{ 1 | nope }}", `unknown filter "nope"`)
	f("{{ 'a' + 1 }}", "cannot add int to a string")
	f("{{ 'x' ", "is not closed")
	f("{% break %}", "{% break %} outside a loop")
}

type raised struct{ s string }

func (r *raised) Error() string { return "raised " + r.s }

// FuzzParse: a template is part of a model file; any source parses or
// fails, and a parsed one renders or fails, never panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"{{ x }}", "{% for m in messages %}{{ m['content'] | trim }}{% endfor %}",
		"{% set ns = namespace(a=1) %}{{ ns.a }}", "{{ messages[::-1][0].content.split('x')[-1] }}", "{%- if a -%}b{%- endif %}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tpl.Render(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "a": true})
	})
}
