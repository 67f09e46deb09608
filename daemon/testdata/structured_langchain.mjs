// LangChain's structured outputs and tool binding against a live
// picometerd (daemon/structured_clients_test.go runs it with NODE_PATH at
// build/npm/node_modules): withStructuredOutput with a zod schema, as
// json_schema (response_format) and as function calling (a required tool),
// on chat completions and on the Responses API; bindTools with
// tool_choice "any" (LangChain's name for required). Every result is
// validated here with zod.
//
// argv: baseURL model maxTokens
// stdout: [{"name", "ok", "detail", "error"}, ...], one per client call.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH || ".", "x.js"));
const imp = (name) => import(require.resolve(name));

const [baseURL, model, maxTokensArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);

const { ChatOpenAI } = await imp("@langchain/openai");
const { z } = await imp("zod");

const person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(120),
  tags: z.array(z.enum(["red", "green", "blue"])).max(3),
  member: z.boolean(),
});
const weatherArgs = z.object({ city: z.string().max(16), unit: z.enum(["c", "f"]) });
const llm = (responses) => new ChatOpenAI({
  model, apiKey: "unused", configuration: { baseURL }, maxTokens, maxRetries: 0, useResponsesApi: responses,
});
const prompt = "Describe a person as JSON.";

const cases = {};
for (const [api, responses] of [["chat", false], ["responses", true]]) {
  for (const method of ["jsonSchema", "functionCalling"]) {
    cases[`langchain withStructuredOutput ${method} ${api}`] = async () => {
      const r = await llm(responses).withStructuredOutput(person, { method, name: "person", strict: true }).invoke(prompt);
      person.parse(r);
      return { detail: JSON.stringify(r) };
    };
  }
  cases[`langchain bindTools any ${api}`] = async () => {
    const m = llm(responses).bindTools(
      [{ type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string", maxLength: 16 }, unit: { type: "string", enum: ["c", "f"] } }, required: ["city", "unit"], additionalProperties: false } } }],
      { tool_choice: "any" },
    );
    const r = await m.invoke("Weather in Paris?");
    if (!r.tool_calls || r.tool_calls.length < 1) throw new Error(`no tool call: ${JSON.stringify(r)}`);
    for (const c of r.tool_calls) {
      if (c.name !== "get_weather" || !c.id) throw new Error(`call ${JSON.stringify(c)}`);
      weatherArgs.parse(c.args);
    }
    return { detail: JSON.stringify(r.tool_calls.map((c) => c.args)) };
  };
}

const results = [];
for (const [name, run] of Object.entries(cases)) {
  try {
    const r = await run();
    results.push({ name, ok: true, ...r });
  } catch (e) {
    results.push({ name, ok: false, error: String(e && e.stack || e) });
  }
}
process.stdout.write(JSON.stringify(results));
