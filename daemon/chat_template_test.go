package daemon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

// TestHostileTemplateModel: issue 25's hostile templates in a model file.
// The model loads, completions work, each chat request gets a 400 naming
// the template's problem, and the daemon stays up.
func TestHostileTemplateModel(t *testing.T) {
	for _, tc := range []struct{ name, tmpl, want string }{
		{"parens=1e6", "{{ " + strings.Repeat("(", 1_000_000) + "1" + strings.Repeat(")", 1_000_000) + " }}", "nested deeper than 200 levels"},
		{"ifs=1e5", strings.Repeat("{% if true %}", 100_000) + strings.Repeat("{% endif %}", 100_000), "nested deeper than 200 levels"},
		{"oneline=5MB", strings.Repeat("{{ messages[0].content }}", 5<<20/25) + "{% if x %}", "{% if %} is not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			ts := startSmallVocab(t, tc.tmpl)
			t.Logf("model with a %d-byte template served after %v", len(tc.tmpl), time.Since(start))
			for i := 0; i < 2; i++ {
				r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)
				e := decodeError(t, r.body)
				if r.status != 400 || e.Param == nil || *e.Param != "messages" || !strings.Contains(e.Message, "chat template: failed to parse") || !strings.Contains(e.Message, tc.want) {
					t.Errorf("chat: status %d, error %+v", r.status, e)
				}
				if r := ts.post("/v1/completions", `{"prompt":"hi there","max_tokens":2}`); r.status != 200 {
					t.Errorf("completions: status %d: %s", r.status, r.body)
				}
			}
			if r := ts.post("/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`); r.status != 400 {
				t.Errorf("/tokenize chat: status %d: %s", r.status, r.body)
			}
		})
	}
}

// TestTokenizeTools: /tokenize renders what a chat request with tools
// would send: tool definitions (key order kept), assistant tool calls
// with their arguments parsed from JSON (as vLLM passes them), tool
// results; chat completions with tools need a template whose tool-call
// format picometer reads (this one has none).
func TestTokenizeTools(t *testing.T) {
	ts := startSmallVocab(t, `{% if tools %}{% for t in tools %}{{ t | tojson }}|{% endfor %}{% endif %}{% for m in messages %}{{ m.role }}:{{ m.content }}`+
		`{% for c in m.tool_calls %}[{{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }} {{ c.function.arguments.a[0] }}]{% endfor %}`+
		`{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif %};{% endfor %}{% if tools is none %}no tools{% endif %}`)
	tools := `[{"type":"function","function":{"name":"f","parameters":{"z":1,"a":2}}}]`
	msgs := `[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": [7]}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]`
	text := func(body string) string {
		t.Helper()
		ids, _ := json.Marshal(ts.tokenize(body).Tokens)
		return ts.detokenize(`{"tokens":` + string(ids) + `}`)
	}
	got := text(`{"messages":` + msgs + `,"tools":` + tools + `,"add_special_tokens":false}`)
	want := `{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}|user:hi;assistant:[c1 f {"b": 1, "a": [7]} 7];tool:42(c1);`
	if got != want {
		t.Errorf("/tokenize with tools:\n got %q\nwant %q", got, want)
	}
	if got := text(`{"messages":[{"role":"user","content":"hi"}],"add_special_tokens":false}`); got != "user:hi;no tools" {
		t.Errorf("/tokenize without tools: %q", got)
	}
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":` + tools + `}`, "tools"},
		{"/tokenize", `{"messages":[{"role":"user","content":"hi"}],"tools":{"a":1}}`, "tools"},
		{"/tokenize", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"retrieval"}]}`, "tools[0].type"},
		{"/tokenize", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{"/tokenize", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"/tokenize", `{"messages":[{"role":"tool","content":"42"}]}`, "messages[0].tool_call_id"},
		{"/tokenize", `{"messages":[{"role":"user","content":"x","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls"},
	} {
		r := ts.post(tc.path, tc.body)
		e := decodeError(t, r.body)
		if r.status != 400 || e.Param == nil || *e.Param != tc.param {
			t.Errorf("%s %s: status %d, error %+v, want param %s", tc.path, tc.body, r.status, e, tc.param)
		}
	}
}

// TestChatTemplateOverride: chat_template (--chat-template) replaces the
// model file's template; a file that cannot be read or parsed is a
// config error naming the key.
func TestChatTemplateOverride(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "small.gguf")
	if err := modelgen.WriteWithVocab(path, modelgen.Tiny, smallVocab(smallTemplate)); err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "good.jinja"), filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(good, []byte("{% for m in messages %}[{{ m.content | upper }}]{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{% for m in messages %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Model = path
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.jinja"), "chat_template: open " + filepath.Join(dir, "missing.jinja") + ": no such file or directory"},
		{bad, "chat_template: " + bad + ": chat template: failed to parse: line 1: {% for %} is not closed: missing {% endfor %}"},
	} {
		c := cfg
		c.ChatTemplate = tc.file
		if err := CheckConfig(c); err == nil || err.Error() != tc.want {
			t.Errorf("CheckConfig: %v, want %q", err, tc.want)
		}
	}
	if c, err := ParseConfig([]byte(`chat_template = "` + good + `"`)); err != nil || c.ChatTemplate != good {
		t.Errorf("ParseConfig: %+v, %v", c.ChatTemplate, err)
	}

	eng, err := native.Open(path, cfg.NativeConfig())
	if errors.Is(err, native.ErrNoCgo) {
		testenv.Missing(t, "engine unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { eng.Close() })
	ts := startServer(t, eng, func(c *Config) { c.Model = path; c.ChatTemplate = good })
	ids, _ := json.Marshal(ts.tokenize(`{"messages":[{"role":"user","content":"hi"}],"add_special_tokens":false}`).Tokens)
	if got := ts.detokenize(`{"tokens":` + string(ids) + `}`); got != "[HI]" {
		t.Errorf("rendered with --chat-template: %q, want %q", got, "[HI]")
	}
}
