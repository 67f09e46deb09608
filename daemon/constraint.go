package daemon

import (
	"fmt"
	"strconv"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/schema"
)

// This file reads the fields that constrain a request's output (OpenAI's
// response_format and text.format, vLLM's guided_* and structured_outputs,
// llama.cpp's grammar and json_schema, SGLang's regex, Ollama's format,
// TGI's grammar object) into one constraintSpec: the GBNF text the engine
// compiles (package constraint writes it). tools.go does the same for
// tools; foreign.go holds the other servers' fields that are refused by
// name. A request carries at most one constraint.

// schemaCache holds the grammars of the JSON schemas translated lately, by
// the schema's text: an agent sends the same schema request after request,
// and translating one costs about half a millisecond
// (constraint.BenchmarkFromJSONSchema). Refused schemas are not cached.
var schemaCache = constraint.NewCache[string](256)

// constraintSpec is a request's output constraint.
type constraintSpec struct {
	kind  string // schema.Constraint*: the metric's label
	param string // the request field that set it, for errors
	gbnf  string // the grammar text
}

// setConstraint records c on r, refusing a second one by name.
func setConstraint(r *genRequest, c *constraintSpec) *apiError {
	if r.Constraint != nil {
		return badRequest(c.param, "invalid_value", "Invalid '%s': the request already constrains its output with '%s'; send one constraint.", c.param, r.Constraint.param)
	}
	r.Constraint = c
	return nil
}

// constraintErr turns a translator's error into a 400 naming the field
// (and, in the message, the schema keyword or regex construct), counted
// as a rejected constraint of kind.
func constraintErr(param, kind string, err error) *apiError {
	e := badRequest(param, "invalid_value", "Invalid '%s': %v", param, err)
	e.Constraint = kind
	return e
}

// schemaConstraint translates the JSON schema raw (an object, or a string
// holding one when asString) set by param.
func schemaConstraint(raw json.RawMessage, param string, asString bool) (*constraintSpec, *apiError) {
	if asString && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected a JSON schema.", param)
		}
		raw = json.RawMessage(s)
	}
	if len(raw) == 0 || (raw[0] != '{' && string(raw) != "true") {
		return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected a JSON schema (an object), but got %s instead.", param, kindOf(raw))
	}
	if g, ok := schemaCache.Get(string(raw)); ok {
		return &constraintSpec{kind: schema.ConstraintJSONSchema, param: param, gbnf: g}, nil
	}
	g, err := constraint.FromJSONSchema(raw, constraint.DefaultLimits)
	if err != nil {
		return nil, constraintErr(param, schema.ConstraintJSONSchema, err)
	}
	schemaCache.Add(string(raw), g)
	return &constraintSpec{kind: schema.ConstraintJSONSchema, param: param, gbnf: g}, nil
}

func jsonObjectConstraint(param string) *constraintSpec {
	return &constraintSpec{kind: schema.ConstraintJSONObject, param: param, gbnf: constraint.JSONObject()}
}

func regexConstraint(raw json.RawMessage, param string) (*constraintSpec, *apiError) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected a string (a regular expression), but got %s instead.", param, kindOf(raw))
	}
	g, err := constraint.FromRegex(s, constraint.DefaultLimits)
	if err != nil {
		return nil, constraintErr(param, schema.ConstraintRegex, err)
	}
	return &constraintSpec{kind: schema.ConstraintRegex, param: param, gbnf: g}, nil
}

func choiceConstraint(raw json.RawMessage, param string) (*constraintSpec, *apiError) {
	var cs []string
	if raw[0] != '[' || json.Unmarshal(raw, &cs) != nil {
		return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected an array of strings, but got %s instead.", param, kindOf(raw))
	}
	g, err := constraint.FromChoices(cs, constraint.DefaultLimits)
	if err != nil {
		return nil, constraintErr(param, schema.ConstraintChoice, err)
	}
	return &constraintSpec{kind: schema.ConstraintChoice, param: param, gbnf: g}, nil
}

func grammarConstraint(raw json.RawMessage, param string) (*constraintSpec, *apiError) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected a string (a GBNF grammar), but got %s instead.", param, kindOf(raw))
	}
	if s == "" {
		return nil, badRequest(param, "invalid_value", "Invalid '%s': the grammar is empty.", param)
	}
	if len(s) > constraint.DefaultLimits.MaxBytes {
		return nil, badRequest(param, "invalid_value", "Invalid '%s': the grammar has %d bytes, over the limit of %d.", param, len(s), constraint.DefaultLimits.MaxBytes)
	}
	return &constraintSpec{kind: schema.ConstraintGrammar, param: param, gbnf: s}, nil
}

// decodeConstraints reads the constraint fields every generating endpoint
// accepts (besides response_format / text.format), and min_p.
func (d *decoder) decodeConstraints(r *genRequest) *apiError {
	if v, ok, err := d.number("min_p"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > 1 {
			return badRequest("min_p", "invalid_value", "Invalid 'min_p': expected a value in [0, 1], but got %v instead.", v)
		}
		r.MinP = float32(v)
	}
	type reader func(raw json.RawMessage, param string) (*constraintSpec, *apiError)
	asSchema := func(raw json.RawMessage, param string) (*constraintSpec, *apiError) {
		return schemaConstraint(raw, param, true)
	}
	jsonObject := func(raw json.RawMessage, param string) (*constraintSpec, *apiError) {
		if string(raw) == "false" {
			return nil, nil
		}
		if string(raw) != "true" {
			return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected a boolean, but got %s instead.", param, kindOf(raw))
		}
		return jsonObjectConstraint(param), nil
	}
	fields := []struct {
		key  string
		read reader
	}{
		{"guided_json", asSchema},           // vLLM
		{"guided_regex", regexConstraint},   // vLLM
		{"guided_choice", choiceConstraint}, // vLLM
		{"guided_grammar", grammarConstraint},
		{"json_schema", asSchema},  // llama.cpp (an object), SGLang (a string)
		{"regex", regexConstraint}, // SGLang
	}
	for _, f := range fields {
		raw, ok := d.get(f.key)
		if !ok {
			continue
		}
		c, err := f.read(raw, f.key)
		if err != nil {
			return err
		}
		if err := setConstraint(r, c); err != nil {
			return err
		}
	}
	// grammar: llama.cpp's GBNF string, or TGI's {"type": "json"|"regex", "value": …}
	if raw, ok := d.get("grammar"); ok {
		var c *constraintSpec
		var err *apiError
		if raw[0] == '{' {
			c, err = tgiGrammar(raw)
		} else {
			c, err = grammarConstraint(raw, "grammar")
		}
		if err != nil {
			return err
		}
		if err := setConstraint(r, c); err != nil {
			return err
		}
	}
	// Ollama's format: "json" or a schema
	if raw, ok := d.get("format"); ok {
		var c *constraintSpec
		switch {
		case string(raw) == `"json"`:
			c = jsonObjectConstraint("format")
		case raw[0] == '{':
			var err *apiError
			if c, err = schemaConstraint(raw, "format", false); err != nil {
				return err
			}
		case string(raw) == `""`:
		default:
			return badRequest("format", "invalid_value", "Invalid 'format': expected \"json\" or a JSON schema, but got %s.", raw)
		}
		if c != nil {
			if err := setConstraint(r, c); err != nil {
				return err
			}
		}
	}
	// vLLM's structured_outputs object
	if raw, ok := d.get("structured_outputs"); ok {
		so, err := newDecoderPrefixed(raw, "structured_outputs.")
		if err != nil {
			return err
		}
		for key := range so.fields {
			sraw, ok := so.get(key)
			if !ok {
				continue
			}
			p := "structured_outputs." + key
			var c *constraintSpec
			switch key {
			case "json":
				c, err = schemaConstraint(sraw, p, true)
			case "regex":
				c, err = regexConstraint(sraw, p)
			case "choice":
				c, err = choiceConstraint(sraw, p)
			case "grammar":
				c, err = grammarConstraint(sraw, p)
			case "json_object":
				c, err = jsonObject(sraw, p)
			case "disable_any_whitespace", "disable_additional_properties", "whitespace_pattern", "structural_tag", "backend", "disable_fallback":
				if string(sraw) == "false" {
					continue
				}
				err = badRequest(p, "unsupported_parameter", "Unsupported parameter '%s': not supported by this server.", p)
			default:
				err = badRequest(p, "unsupported_parameter", "Unsupported parameter '%s'.", p)
			}
			if err != nil {
				return err
			}
			if c != nil {
				if err := setConstraint(r, c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// tgiGrammar reads TGI's grammar object.
func tgiGrammar(raw json.RawMessage) (*constraintSpec, *apiError) {
	gd, err := newDecoderPrefixed(raw, "grammar.")
	if err != nil {
		return nil, err
	}
	typ, _, err := gd.str("type")
	if err != nil {
		return nil, err
	}
	val, ok := gd.get("value")
	if !ok {
		return nil, badRequest("grammar.value", "missing_required_parameter", "Missing required parameter: 'grammar.value'.")
	}
	switch typ {
	case "json", "json_object":
		return schemaConstraint(val, "grammar.value", true)
	case "regex":
		return regexConstraint(val, "grammar.value")
	}
	return nil, badRequest("grammar.type", "invalid_value", "Invalid 'grammar.type': expected \"json\" or \"regex\", but got %s.", strconv.Quote(typ))
}

// decodeResponseFormat reads chat's response_format (param) or the
// Responses API's text.format: {"type": "text"}, {"type": "json_object"}
// (llama.cpp: with an optional "schema"), {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}} (chat) or {"type":
// "json_schema", "name", "schema", "strict"} (Responses: flat). The schema
// is enforced whether strict is true or not.
func decodeResponseFormat(raw json.RawMessage, param string, flat bool) (*constraintSpec, *apiError) {
	fd, err := newDecoderPrefixed(raw, param+".")
	if err != nil {
		return nil, err
	}
	typ, ok, err := fd.str("type")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest(param+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", param)
	}
	switch typ {
	case "text":
		return nil, nil
	case "json_object":
		if sraw, ok := fd.get("schema"); ok { // llama.cpp
			return schemaConstraint(sraw, param+".schema", false)
		}
		return jsonObjectConstraint(param), nil
	case "json_schema":
		sd, sp := fd, param
		if !flat {
			jraw, ok := fd.get("json_schema")
			if !ok {
				if sraw, ok := fd.get("schema"); ok { // llama.cpp's flat form
					return schemaConstraint(sraw, param+".schema", false)
				}
				return nil, badRequest(param+".json_schema", "missing_required_parameter", "Missing required parameter: '%s.json_schema'.", param)
			}
			sp = param + ".json_schema"
			if sd, err = newDecoderPrefixed(jraw, sp+"."); err != nil {
				return nil, err
			}
		}
		if _, _, err := sd.str("name"); err != nil {
			return nil, err
		}
		if _, _, err := sd.boolean("strict"); err != nil {
			return nil, err
		}
		sraw, ok := sd.get("schema")
		if !ok {
			return nil, badRequest(sp+".schema", "missing_required_parameter", "Missing required parameter: '%s.schema'.", sp)
		}
		return schemaConstraint(sraw, sp+".schema", false)
	}
	return nil, badRequest(param+".type", "invalid_value", "Invalid value for '%s.type': expected \"text\", \"json_object\" or \"json_schema\", but got %s.", param, strconv.Quote(typ))
}

var _ = fmt.Sprintf
