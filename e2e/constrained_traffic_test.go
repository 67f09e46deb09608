package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/schema"
)

// This file is the live stack's constrained traffic (issue 26): chat with
// a JSON schema (response_format) and with tools and tool_choice
// "required", so the constraint families and their dashboard row are
// shown to have data. An engine without constrained decoding refuses each
// of them by name (400): they then count as rejected constrained requests
// and the compile, mask and tool-call series stay empty, which the live
// test reports instead of failing.

// liveModel writes the live tests' model to dir/tiny.gguf (served as
// "tiny"): the tiny model (modelgen.Tiny, the weights of make models'
// tiny.gguf) with a 2048-token context. Its own 256 cannot hold a tools
// request: picometer's tool format puts the tool definitions in a system
// turn of about 250 byte tokens before the conversation and the call.
func liveModel(t *testing.T, dir string) string {
	t.Helper()
	p := modelgen.Tiny
	p.Context = 2048
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.Write(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

// constraintsEnforced asks the daemon at addr whether it enforces
// constraints: one JSON-mode chat answered 200 says yes; a 400 naming
// constrained decoding says no, and why (its message). Anything else fails
// the test. The probe is a request like any other (its event counts).
func constraintsEnforced(t *testing.T, c *http.Client, addr, model string) (bool, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"a JSON object"}],"max_tokens":32,"response_format":{"type":"json_object"}}`, model)
	resp, err := c.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		return true, ""
	}
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if resp.StatusCode == 400 && json.Unmarshal(b, &e) == nil && e.Error.Param != nil &&
		*e.Error.Param == "response_format" && strings.Contains(e.Error.Message, "constrained decoding") {
		return false, e.Error.Message
	}
	t.Fatalf("JSON-mode probe: HTTP %d %s; want 200, or a 400 on response_format naming constrained decoding", resp.StatusCode, b)
	return false, ""
}

// constrainedTraffic returns the constrained requests: answered (200) when
// the engine enforces constraints, else refused (400).
func constrainedTraffic(model string, enforced bool) []request {
	status := 400
	if enforced {
		status = 200
	}
	var rs []request
	add := func(name, body string, stream bool) {
		rs = append(rs, request{name: name, kind: strings.TrimRight(name, " 0123456789"), method: http.MethodPost,
			path: "/v1/chat/completions", body: body, stream: stream, wantStatus: status, event: true})
	}
	// Each request's schema differs (maxLength), so each compiles its own
	// grammar: a cached one observes no compile time, and the compile panel
	// needs observations in the waves after the warm-up, not only in it.
	schemaJSON := func(i int) string {
		return fmt.Sprintf(`{"type":"object","properties":{"city":{"type":"string","maxLength":%d},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`, 10+i)
	}
	for i := 0; i < 3; i++ {
		add(fmt.Sprintf("json_schema chat %d", i), fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"weather plan"}],"max_tokens":192,"temperature":0.8,"seed":%d,`+
			`"response_format":{"type":"json_schema","json_schema":{"name":"plan","strict":true,"schema":%s}}}`, model, i+1, schemaJSON(i)), false)
	}
	for i := 0; i < 3; i++ {
		tools := `[{"type":"function","function":{"name":"get_weather","description":"weather of a city","parameters":` + schemaJSON(3+i) + `}}]`
		add(fmt.Sprintf("tools chat %d", i), fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"weather in Paris?"}],"max_tokens":256,"temperature":0.8,"seed":%d,`+
			`"tools":%s,"tool_choice":"required","stream":%t}`, model, i+1, tools, i%2 == 1), i%2 == 1)
	}
	return rs
}

// needsEnforcement says whether a dashboard query reads a series only an
// engine that enforces constraints produces (grammar compile time, mask
// time, tool calls); the constrained-requests panel has data either way
// (refused requests count as rejected).
func needsEnforcement(expr string) bool {
	for _, name := range []string{alerts.Series(schema.IDConstraintCompile, "_bucket"),
		alerts.Series(schema.IDConstraintMask, "_bucket"), alerts.Series(schema.IDToolCalls, "")} {
		if strings.Contains(expr, name) {
			return true
		}
	}
	return false
}

// checkConstraintSeries holds the sidecar's exposition to the constrained
// traffic: refused requests counted as rejected when the engine refuses
// constraints; else valid JSON-schema and tool requests, tool calls in the
// model's format, and compile and mask observations.
func checkConstraintSeries(t *testing.T, m metricsText, enforced bool, why string) {
	t.Helper()
	reqs := alerts.Series(schema.IDConstraintRequests, "")
	got := func(kind, outcome string) float64 {
		return m.sum(reqs, map[string]string{schema.AttrConstraint.Key: kind, schema.AttrOutcome.Key: outcome})
	}
	if !enforced {
		for _, kind := range []string{schema.ConstraintJSONObject, schema.ConstraintJSONSchema, schema.ConstraintTools} {
			if n := got(kind, schema.OutcomeRejected); n < 1 {
				t.Errorf("%s{constraint=%q,outcome=rejected} = %v; the engine refuses constraints, so each refused request counts", reqs, kind, n)
			}
		}
		t.Logf("constrained traffic refused by name, counted as rejected; compile, mask and tool-call series not checked: %s", why)
		return
	}
	for _, kind := range []string{schema.ConstraintJSONSchema, schema.ConstraintTools} {
		if n := got(kind, schema.OutcomeValid) + got(kind, schema.OutcomeLength); n < 1 {
			t.Errorf("%s{constraint=%q}: no valid or length-truncated request counted", reqs, kind)
		}
	}
	if n := m.sum(alerts.Series(schema.IDToolCalls, ""), nil); n < 1 {
		t.Errorf("%s = %v; tool_choice required must emit calls", alerts.Series(schema.IDToolCalls, ""), n)
	}
	for _, id := range []string{schema.IDConstraintCompile, schema.IDConstraintMask} {
		name := alerts.Series(id, "_count")
		if n := m.sum(name, nil); n < 1 {
			t.Errorf("%s = %v; want observations from the constrained traffic", name, n)
		}
	}
}
