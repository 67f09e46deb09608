// Structured outputs and tool calls through the npm clients people use,
// against a live picometerd (run by daemon/structured_clients_test.go with
// NODE_PATH at build/npm/node_modules). The model has random weights: only
// the grammar makes its output valid, and every result is validated here
// with zod, independently of picometer (the JSON schema sent is the one
// the AI SDK derives from the same zod schema).
//
// argv: baseURL model maxTokens
// stdout: [{"name", "ok", "detail", "error"}, ...], one per client call.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH || ".", "x.js"));
const imp = (name) => import(require.resolve(name));

const [baseURL, model, maxTokensArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);

const { default: OpenAI } = await imp("openai");
const { generateObject, generateText, streamText, tool, zodSchema } = await imp("ai");
const { createOpenAI } = await imp("@ai-sdk/openai");
const { z } = await imp("zod");

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const provider = createOpenAI({ baseURL, apiKey: "unused" });

const person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(120),
  tags: z.array(z.enum(["red", "green", "blue"])).max(3),
  member: z.boolean(),
});
const weatherArgs = z.object({ city: z.string().max(16), unit: z.enum(["c", "f"]) });
const weatherSchema = zodSchema(weatherArgs).jsonSchema;

const prompt = "Describe a person as JSON.";
const cases = {
  "openai chat.completions json_schema": async () => {
    const r = await client.chat.completions.create({
      model, max_tokens: maxTokens, seed: 7,
      messages: [{ role: "user", content: prompt }],
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: zodSchema(person).jsonSchema } },
    });
    const text = r.choices[0].message.content;
    person.parse(JSON.parse(text));
    return { detail: text, finish: r.choices[0].finish_reason };
  },
  "ai generateObject openai(model)": async () => {
    const r = await generateObject({ model: provider(model), schema: person, prompt, maxOutputTokens: maxTokens, seed: 7 });
    person.parse(r.object);
    return { detail: JSON.stringify(r.object) };
  },
  "ai generateObject openai.chat(model)": async () => {
    const r = await generateObject({ model: provider.chat(model), schema: person, prompt, maxOutputTokens: maxTokens, seed: 7 });
    person.parse(r.object);
    return { detail: JSON.stringify(r.object) };
  },
  "ai generateText tools required openai(model)": async () => {
    const r = await generateText({
      model: provider(model), prompt: "Weather in Paris?", maxOutputTokens: maxTokens, seed: 7,
      tools: { get_weather: tool({ description: "Weather in a city", inputSchema: weatherArgs }) }, toolChoice: "required",
    });
    if (r.toolCalls.length < 1) throw new Error(`no tool call: ${JSON.stringify(r.content)}`);
    for (const c of r.toolCalls) {
      if (c.toolName !== "get_weather") throw new Error(`tool ${c.toolName}`);
      weatherArgs.parse(c.input);
    }
    return { detail: JSON.stringify(r.toolCalls.map((c) => c.input)), finish: r.finishReason };
  },
  "ai generateText tools required openai.chat(model)": async () => {
    const r = await generateText({
      model: provider.chat(model), prompt: "Weather in Paris?", maxOutputTokens: maxTokens, seed: 7,
      tools: { get_weather: tool({ description: "Weather in a city", inputSchema: weatherArgs }) }, toolChoice: "required",
    });
    if (r.toolCalls.length < 1) throw new Error(`no tool call: ${JSON.stringify(r.content)}`);
    for (const c of r.toolCalls) weatherArgs.parse(c.input);
    if (r.finishReason !== "tool-calls") throw new Error(`finish ${r.finishReason}`);
    return { detail: JSON.stringify(r.toolCalls.map((c) => c.input)), finish: r.finishReason };
  },
  "openai chat.completions stream tool_calls": async () => {
    const stream = await client.chat.completions.create({
      model, max_tokens: maxTokens, seed: 7, stream: true,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [{ type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: weatherSchema } }],
      tool_choice: "required",
    });
    const calls = [];
    let finish = null, fragments = 0;
    for await (const ch of stream) {
      const c = ch.choices[0];
      if (!c) continue;
      for (const d of c.delta.tool_calls || []) {
        if (!calls[d.index]) calls[d.index] = { id: d.id, name: d.function.name, args: "" };
        if (d.function.arguments) { calls[d.index].args += d.function.arguments; fragments++; }
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (calls.length < 1 || finish !== "tool_calls") throw new Error(`calls ${JSON.stringify(calls)} finish ${finish}`);
    for (const c of calls) {
      if (!c.id || !c.id.startsWith("call_") || c.name !== "get_weather") throw new Error(`call ${JSON.stringify(c)}`);
      weatherArgs.parse(JSON.parse(c.args));
    }
    return { detail: `${calls.length} call(s) in ${fragments} argument fragments: ${calls.map((c) => c.args).join(" ")}`, finish };
  },
  "ai streamText tools required openai(model)": async () => {
    const r = streamText({
      model: provider(model), prompt: "Weather in Paris?", maxOutputTokens: maxTokens, seed: 7,
      tools: { get_weather: tool({ description: "Weather in a city", inputSchema: weatherArgs }) }, toolChoice: "required",
    });
    let deltas = 0;
    for await (const p of r.fullStream) {
      if (p.type === "tool-input-delta") deltas++;
      if (p.type === "error") throw p.error;
    }
    const calls = await r.toolCalls, finish = await r.finishReason;
    if (calls.length < 1 || finish !== "tool-calls") throw new Error(`calls ${JSON.stringify(calls)} finish ${finish}`);
    for (const c of calls) {
      if (c.toolName !== "get_weather") throw new Error(`tool ${c.toolName}`);
      weatherArgs.parse(c.input);
    }
    return { detail: `${JSON.stringify(calls.map((c) => c.input))} in ${deltas} input deltas`, finish };
  },
  "openai responses stream function_call": async () => {
    const stream = await client.responses.create({
      model, input: "Weather in Paris?", max_output_tokens: maxTokens, stream: true,
      tools: [{ type: "function", name: "get_weather", description: "Weather in a city", parameters: weatherSchema, strict: true }],
      tool_choice: "required",
    });
    const args = {};
    let final = null;
    for await (const ev of stream) {
      if (ev.type === "response.function_call_arguments.delta") args[ev.output_index] = (args[ev.output_index] || "") + ev.delta;
      if (ev.type === "response.completed") final = ev.response;
    }
    const calls = (final && final.output || []).filter((o) => o.type === "function_call");
    if (calls.length < 1) throw new Error(`no function_call in ${JSON.stringify(final)}`);
    for (const c of calls) {
      const i = final.output.indexOf(c);
      if (!c.call_id || c.name !== "get_weather" || args[i] !== c.arguments) throw new Error(`call ${JSON.stringify(c)}, streamed ${args[i]}`);
      weatherArgs.parse(JSON.parse(c.arguments));
    }
    return { detail: calls.map((c) => c.arguments).join(" "), finish: final.status };
  },
};

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
