package daemon

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

// TestStructuredClientsScripted runs TestStructuredClients' client calls
// (testdata/structured.mjs: the openai SDK's json_schema chat and streamed
// tool calls, the AI SDK's generateObject and generateText with required
// tools, on the Responses API and on chat) against the fake engine, which
// writes a valid answer whatever the grammar: a person object, or a call
// of get_weather in picometer's format when the prompt holds tools. So the
// daemon's side of structured outputs (response_format and text.format
// accepted, tool calls parsed into tool_calls whole and streamed, and into
// Responses function_call items, finish reasons) is held to what the real
// SDKs read, independently of the engine's grammar enforcement, which
// TestStructuredClients adds on the real engine.
func TestStructuredClientsScripted(t *testing.T) {
	node := testenv.Node(t)
	for _, p := range []string{"openai", "ai", "@ai-sdk/openai", "zod"} {
		testenv.NPMPackage(t, p)
	}
	eng := newFakeEngine(4096)
	eng.gen = func(prompt []int32) []int32 {
		var sb strings.Builder
		for _, tok := range prompt {
			if tok < 256 {
				sb.WriteByte(byte(tok))
			}
		}
		answer := `{"name": "Ada", "age": 36, "tags": ["red", "blue"], "member": true}`
		if strings.Contains(sb.String(), "# Tools") {
			answer = `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}</tool_call>`
		}
		return scripted(answer)(prompt)
	}
	ts := startServer(t, eng, nil)
	if ts.d.grammarErr != "" {
		t.Fatalf("the fake engine takes token bytes, yet constraints are refused: %s", ts.d.grammarErr)
	}
	cmd := exec.Command(node, "testdata/structured.mjs", ts.url+"/v1", ts.d.model, "1200")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("structured.mjs: %v\n%s", err, out)
	}
	var res []struct {
		Name, Detail, Error, Finish string
		OK                          bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res) != 6 {
		t.Fatalf("%d results: %s", len(res), out)
	}
	for _, r := range res {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		testenv.Report(t, "%s %s: valid (%s) %s", t.Name(), r.Name, r.Finish, r.Detail)
	}
}
