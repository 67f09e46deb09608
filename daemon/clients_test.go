package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

// TestClients is issue 15's acceptance test: the npm clients people use
// (testdata/clients.mjs) talk to picometerd on the real engine and the
// tiny model, greedy, and each call returns the text and the usage that a
// plain /v1/chat/completions request for the same conversation returns:
// the openai SDK's responses.create (plain, and streamed with for await
// over its events), the Vercel AI SDK's generateText and streamText on the
// default openai(model) (the Responses API) and on .chat(), and
// LangChain's ChatOpenAI with useResponsesApi (invoke and stream), and the
// openai SDK's chat with logprobs: true, top_logprobs: 3 (one entry per
// token, three alternatives each, the greedy token the first).
func TestClients(t *testing.T) {
	const langchainStream = "langchain ChatOpenAI useResponsesApi stream"
	node := testenv.Node(t)
	for _, p := range []string{"openai", "ai", "@ai-sdk/openai", "@langchain/openai", "@langchain/core"} {
		testenv.NPMPackage(t, p)
	}
	ts := startTiny(t, nil)
	const maxTokens = 12
	conv := map[string]string{"system": "Be brief.", "user": "Say hi to me, ☃."}

	// The reference: the same conversation over plain HTTP.
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "system", "content": conv["system"]}, {"role": "user", "content": conv["user"]}},
		"max_tokens": maxTokens, "temperature": 0})
	ref := decodeCompletionResponse(t, ts.post("/v1/chat/completions", string(body)).body)
	want, wantIn, wantOut := ref.text(), ref.Usage.PromptTokens, ref.Usage.CompletionTokens

	in, _ := json.Marshal(conv)
	cmd := exec.Command(node, "testdata/clients.mjs", ts.url+"/v1", ts.d.model, strconv.Itoa(maxTokens))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("clients.mjs: %v\n%s", err, stderr.String())
	}
	var res []struct {
		Name         string   `json:"name"`
		Text         string   `json:"text"`
		InputTokens  int      `json:"input_tokens"`
		OutputTokens int      `json:"output_tokens"`
		Events       []string `json:"events"`
		Error        string   `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res) != 9 {
		t.Fatalf("%d results: %s", len(res), out)
	}
	for _, r := range res {
		switch {
		case r.Error != "":
			t.Errorf("%s: %s", r.Name, r.Error)
		case r.Name == langchainStream && ref.finish() == "length" && r.Text == want && r.InputTokens == -1:
			// See clients.mjs: LangChain ignores response.incomplete's usage.
			testenv.Report(t, "client %s: text equal to /v1/chat/completions'; no usage (LangChain reads it from response.completed only, and max_output_tokens made this response incomplete)", r.Name)
		case r.Text != want || r.InputTokens != wantIn || r.OutputTokens != wantOut:
			t.Errorf("%s: text %q, usage %d in %d out; /v1/chat/completions gave %q, %d in %d out",
				r.Name, r.Text, r.InputTokens, r.OutputTokens, want, wantIn, wantOut)
		default:
			testenv.Report(t, "client %s: text and usage (%d in, %d out) equal to /v1/chat/completions'", r.Name, r.InputTokens, r.OutputTokens)
		}
		if r.Events != nil {
			got := strings.Join(r.Events, " ")
			if !strings.HasPrefix(got, "response.created response.in_progress response.output_item.added response.content_part.added") ||
				!strings.HasSuffix(got, "response.output_text.done response.content_part.done response.output_item.done response.completed") &&
					!strings.HasSuffix(got, "response.output_text.done response.content_part.done response.output_item.done response.incomplete") {
				t.Errorf("%s: events %s", r.Name, got)
			}
		}
	}
}
