// Package constraint translates the constraints a request may carry into
// GBNF text, the grammar dialect of llama.cpp that the engine compiles
// (native.CompileGrammar): a JSON schema (FromJSONSchema), JSON mode
// (JSONObject), a regular expression (FromRegex), a list of choices
// (FromChoices), and the tool calls of a chat template's own format
// (ToolGrammar). It also detects a template's tool-call format
// (DetectToolFormat) and parses a model's output back into calls
// (ParseToolCalls).
//
// Every translator is a pure function from text to text, bounded by
// Limits: a schema or pattern that would need more rules, more grammar
// text, deeper nesting or a longer repetition than the limits allow is
// refused with an *Error, never compiled without bound. Every keyword the
// translator cannot enforce is refused by name (Error.Keyword); none is
// ignored, except the annotations that constrain nothing (title,
// description, $schema, $id, $comment, default, examples, deprecated,
// readOnly, writeOnly).
//
// What is enforced, and how (the grammar accepts exactly these texts):
//
//   - JSON values are written with optional whitespace of at most
//     MaxSpace characters between tokens (so a grammar never lets a model
//     pad without end); integers have at most 18 digits when unbounded,
//     fractions at most 16 digits, exponents at most 3.
//   - object: properties in their declared order; required ones present,
//     the others optional. additionalProperties false: no other key;
//     absent, true or a schema: other keys after the declared ones
//     (values of that schema). patternProperties, propertyNames,
//     minProperties, maxProperties, dependentRequired,
//     unevaluatedProperties: refused.
//   - array: items, prefixItems, minItems, maxItems (at most MaxRepeat);
//     uniqueItems, contains: refused.
//   - string: minLength, maxLength (in characters, at most MaxRepeat; a
//     length-bounded string holds no character above U+FFFF, so that its
//     length is the same in code points, JSON Schema's count, and in UTF-16
//     units, JavaScript's and so zod's),
//     pattern (FromRegex's subset, inside the quotes; a class never yields
//     '"', '\' or a control character), format date, time, date-time,
//     uuid; other formats refused.
//   - integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact,
//     as digit ranges); multipleOf refused.
//   - number: the same bounds when they are integers (an exponent is then
//     not allowed); a non-integer bound is refused.
//   - enum, const (any JSON values, written compactly), boolean, null,
//     type as a list, anyOf, allOf of one schema, $ref to "#", "#/$defs/…"
//     or "#/definitions/…" (recursion allowed). oneOf, not, if/then/else:
//     refused.
package constraint
