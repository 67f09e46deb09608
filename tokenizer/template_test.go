package tokenizer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

// conversations are the chats the template oracle test renders, each with
// add_generation_prompt on and off.
func conversations() [][]Message {
	u := func(s string) Message { return Message{Role: "user", Content: s} }
	a := func(s string) Message { return Message{Role: "assistant", Content: s} }
	sys := func(s string) Message { return Message{Role: "system", Content: s} }
	return [][]Message{
		{u("Hello!")},
		{sys("You are a helpful assistant."), u("Hi")},
		{u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")},
		{sys("Be brief."), u("One"), a("Two"), u("Three")},
		{u("")},
		{sys(""), u("")},
		{u("  padded  \n")},
		{u("你好，世界！"), a("こんにちは 👋🏽"), u("Ünïcödé e\u0301 👨‍👩‍👧‍👦")},
		{u("multi\nline\n\ncontent\twith tabs")},
		{sys("S"), u("a"), a("b"), u("c"), a("d"), u("e")},
		{u("What is 2+2?"), a("<think>\nadd\n</think>\n\n4"), u("And 3+3?")},
		{u("code: ```go\nfunc f() {}\n```")},
		{u("quote ' and \" and \\ backslash")},
		{u("{{ not a template }} {% neither %}")},
		{sys("  system with spaces  "), u("x")},
		{u("a"), a("")},
		{u("a"), a("b")},
		{u("long " + strings.Repeat("word ", 200))},
		{sys("système"), u("ça va?"), a("oui"), u("merci")},
		{u("emoji only 🎉🎉🎉")},
		{u("numbers 1234567890 3.14")},
		{u("\n\nleading newlines")},
		{u("a"), u("b")},                       // Gemma 3 raises: roles must alternate
		{a("assistant first"), u("then user")}, // so does this
	}
}

func TestOracleTemplates(t *testing.T) {
	for _, model := range []string{"llama3", "qwen3", "gemma3"} {
		t.Run(model, func(t *testing.T) {
			tk := loadHF(t, model)
			tpl := tk.TemplateFor()
			if tpl == nil {
				t.Fatalf("%s: no chat template", model)
			}
			var chats []oracleChat
			var convs [][]Message
			for _, c := range conversations() {
				for _, gen := range []bool{false, true} {
					var ms []map[string]any
					for _, m := range c {
						ms = append(ms, map[string]any{"role": m.Role, "content": m.Content})
					}
					chats = append(chats, oracleChat{Messages: ms, AddGenerationPrompt: gen})
					convs = append(convs, c)
				}
			}
			o := runOracle(t, model, nil, chats)
			same, errs := 0, 0
			for i, c := range chats {
				got, err := tpl.Render(convs[i], c.AddGenerationPrompt)
				switch {
				case o.Errors[i] != "":
					// the reference refuses it (raise_exception): so must we
					errs++
					if err == nil || !strings.Contains(err.Error(), o.Errors[i]) {
						t.Errorf("%s chat %d: reference error %q, got %q, %v", model, i, o.Errors[i], got, err)
					}
				case err != nil:
					t.Errorf("%s chat %d: %v", model, i, err)
				case got != o.Rendered[i]:
					t.Errorf("%s chat %d:\n got %q\nwant %q", model, i, got, o.Rendered[i])
				default:
					same++
					if ids := tk.Encode(nil, got, true); fmt.Sprint(ids) != fmt.Sprint(o.RenderedIDs[i]) {
						t.Errorf("%s chat %d: prompt ids %v, oracle %v", model, i, ids, o.RenderedIDs[i])
					}
				}
			}
			testenv.Report(t, "chat template oracle %s: %d conversations compared with @huggingface/jinja, %d byte-identical with equal prompt ids, %d refused by both",
				model, len(chats), same, errs)
		})
	}
}
