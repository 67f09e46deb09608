// Sends one conversation to a live picometerd through the npm clients
// people use, each the way its documentation shows (run by
// daemon/clients_test.go with NODE_PATH at build/npm/node_modules).
//
// argv: baseURL model maxTokens ; stdin: {"system": "...", "user": "..."}
// stdout: [{"name", "text", "input_tokens", "output_tokens", "events",
//           "error"}, ...], one per client call; events lists a stream's
//           event types (with their sequence numbers checked here).
import { createRequire } from "node:module";
import path from "node:path";

// NODE_PATH does not reach ESM imports: resolve through require.
const require = createRequire(path.join(process.env.NODE_PATH || ".", "x.js"));
const imp = (name) => import(require.resolve(name));

const [baseURL, model, maxTokensArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);
const conv = JSON.parse(require("fs").readFileSync(0, "utf8"));

const { default: OpenAI } = await imp("openai");
const { generateText, streamText } = await imp("ai");
const { createOpenAI } = await imp("@ai-sdk/openai");
const { ChatOpenAI } = await imp("@langchain/openai");
const { SystemMessage, HumanMessage } = await imp("@langchain/core/messages");

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const provider = createOpenAI({ baseURL, apiKey: "unused" });
const messages = [
  { role: "system", content: conv.system },
  { role: "user", content: conv.user },
];

const cases = {
  // openai: the Responses API, plain and streamed (for await over events).
  "openai responses.create": async () => {
    const r = await client.responses.create({ model, instructions: conv.system, input: conv.user, max_output_tokens: maxTokens, temperature: 0 });
    return { text: r.output_text, input_tokens: r.usage.input_tokens, output_tokens: r.usage.output_tokens, status: r.status };
  },
  "openai responses.create stream": async () => {
    const stream = await client.responses.create({ model, input: messages, max_output_tokens: maxTokens, temperature: 0, stream: true });
    let text = "", final = null, seq = -1;
    const events = [];
    for await (const ev of stream) {
      if (ev.sequence_number !== seq + 1) throw new Error(`sequence_number ${ev.sequence_number} after ${seq}`);
      seq = ev.sequence_number;
      if (events[events.length - 1] !== ev.type) events.push(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
    }
    const full = final.output[0].content[0].text;
    if (full !== text) throw new Error(`final output text ${JSON.stringify(full)} != deltas ${JSON.stringify(text)}`);
    return { text, input_tokens: final.usage.input_tokens, output_tokens: final.usage.output_tokens, events, status: final.status };
  },
  // The Vercel AI SDK: the default provider model (the Responses API) and .chat().
  "ai generateText openai(model)": async () => {
    const r = await generateText({ model: provider(model), messages, maxOutputTokens: maxTokens, temperature: 0 });
    return { text: r.text, input_tokens: r.usage.inputTokens, output_tokens: r.usage.outputTokens, finish: r.finishReason };
  },
  "ai streamText openai(model)": async () => {
    const r = streamText({ model: provider(model), messages, maxOutputTokens: maxTokens, temperature: 0 });
    let text = "";
    for await (const d of r.textStream) text += d;
    const u = await r.usage;
    return { text, input_tokens: u.inputTokens, output_tokens: u.outputTokens, finish: await r.finishReason };
  },
  "ai generateText openai.chat(model)": async () => {
    const r = await generateText({ model: provider.chat(model), messages, maxOutputTokens: maxTokens, temperature: 0 });
    return { text: r.text, input_tokens: r.usage.inputTokens, output_tokens: r.usage.outputTokens, finish: r.finishReason };
  },
  "ai streamText openai.chat(model)": async () => {
    const r = streamText({ model: provider.chat(model), messages, maxOutputTokens: maxTokens, temperature: 0 });
    let text = "";
    for await (const d of r.textStream) text += d;
    const u = await r.usage;
    return { text, input_tokens: u.inputTokens, output_tokens: u.outputTokens, finish: await r.finishReason };
  },
  // openai: chat with log-probabilities.
  "openai chat.completions.create logprobs": async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: maxTokens, temperature: 0, logprobs: true, top_logprobs: 3 });
    const lp = r.choices[0].logprobs.content;
    if (lp.length !== r.usage.completion_tokens) throw new Error(`${lp.length} logprobs for ${r.usage.completion_tokens} tokens`);
    for (const t of lp) {
      if (t.top_logprobs.length !== 3 || !(t.logprob <= 0) || t.top_logprobs[0].logprob !== t.logprob || !Array.isArray(t.bytes))
        throw new Error(`logprob entry ${JSON.stringify(t)}`);
    }
    return { text: r.choices[0].message.content, input_tokens: r.usage.prompt_tokens, output_tokens: r.usage.completion_tokens };
  },
  // LangChain on the Responses API.
  "langchain ChatOpenAI useResponsesApi invoke": async () => {
    const llm = new ChatOpenAI({ model, temperature: 0, maxTokens, useResponsesApi: true, maxRetries: 0, apiKey: "unused", configuration: { baseURL } });
    const m = await llm.invoke([new SystemMessage(conv.system), new HumanMessage(conv.user)]);
    return { text: m.text, input_tokens: m.usage_metadata.input_tokens, output_tokens: m.usage_metadata.output_tokens };
  },
  "langchain ChatOpenAI useResponsesApi stream": async () => {
    const llm = new ChatOpenAI({ model, temperature: 0, maxTokens, useResponsesApi: true, maxRetries: 0, apiKey: "unused", configuration: { baseURL } });
    let text = "", usage = null;
    for await (const c of await llm.stream([new SystemMessage(conv.system), new HumanMessage(conv.user)])) {
      text += c.text;
      if (c.usage_metadata) usage = c.usage_metadata;
    }
    // LangChain 0.6 reads usage from response.completed only, not from
    // response.incomplete (what OpenAI, and picometer, send when
    // max_output_tokens cuts the response): -1 then.
    return { text, input_tokens: usage ? usage.input_tokens : -1, output_tokens: usage ? usage.output_tokens : -1 };
  },
};

const only = process.env.CLIENT_CASES ? process.env.CLIENT_CASES.split(",") : Object.keys(cases);
const out = [];
for (const name of only) {
  try {
    out.push({ name, ...(await cases[name]()) });
  } catch (e) {
    out.push({ name, error: String(e && e.stack ? e.stack : e) });
  }
}
process.stdout.write(JSON.stringify(out));
