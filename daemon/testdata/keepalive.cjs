// Streams one chat through the npm openai client from a picometerd whose
// stream is held silent long enough to get keep-alive comments (run by
// daemon/keepalive_test.go with NODE_PATH at build/npm/node_modules).
//
// argv: baseURL ; stdout: {"text": the streamed content joined, "chunks": n,
// "finish_reason": the last chunk's}
"use strict";
const OpenAI = require("openai");

const [baseURL] = process.argv.slice(2);
(async () => {
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: "", messages: [{ role: "user", content: "keep me alive" }], max_tokens: 8, stream: true,
  });
  let text = "", chunks = 0, finish = null;
  for await (const c of stream) {
    chunks++;
    const ch = c.choices[0];
    if (ch && ch.delta && ch.delta.content) text += ch.delta.content;
    if (ch && ch.finish_reason) finish = ch.finish_reason;
  }
  process.stdout.write(JSON.stringify({ text, chunks, finish_reason: finish }));
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e));
  process.exit(1);
});
