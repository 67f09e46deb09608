// Sends chats to a live picometerd through the npm openai client and
// counts the same prompts with Hugging Face's tools (run by
// daemon/tokenize_test.go with NODE_PATH at build/npm/node_modules).
//
// argv: baseURL model(llama3|qwen3|gemma3) ; stdin: [{"messages": [...]}, ...]
// stdout: [{"prompt_tokens", "completion_tokens", "finish_reason",
//           "apply_chat_template", "hf_count"}, ...]
// apply_chat_template is @lenml/tokenizers' apply_chat_template (a port of
// transformers.js's) with add_generation_prompt; hf_count renders the
// template with @huggingface/jinja and counts @huggingface/tokenizers' ids.
"use strict";
const OpenAI = require("openai");
const { Tokenizer } = require("@huggingface/tokenizers");
const { Template } = require("@huggingface/jinja");

const [baseURL, model] = process.argv.slice(2);
const chats = JSON.parse(require("fs").readFileSync(0, "utf8"));
const pkg = `@lenml/tokenizer-${model}`;
const lenml = require(pkg).fromPreTrained();
const tj = require(`${pkg}/models/tokenizer.json`);
const cfg = require(`${pkg}/models/tokenizer_config.json`);
const hf = new Tokenizer(tj, cfg);
const tpl = new Template(cfg.chat_template);
const name = (k) => (cfg[k] && typeof cfg[k] === "object" ? cfg[k].content : cfg[k]);

(async () => {
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  const out = [];
  for (const c of chats) {
    const r = await client.chat.completions.create({ model: "", messages: c.messages, max_tokens: 4, temperature: 0 });
    // @lenml/tokenizers' older Jinja cannot parse every template (Qwen3's
    // messages[::-1]): -1 then, and the test relies on hf_count.
    let act = -1;
    try {
      act = Array.from(lenml.apply_chat_template(c.messages, { add_generation_prompt: true, tokenize: true })).length;
    } catch (e) {}
    const text = tpl.render({ messages: c.messages, add_generation_prompt: true, bos_token: name("bos_token"), eos_token: name("eos_token") });
    out.push({
      prompt_tokens: r.usage.prompt_tokens,
      completion_tokens: r.usage.completion_tokens,
      finish_reason: r.choices[0].finish_reason,
      apply_chat_template: act,
      hf_count: hf.encode(text, { add_special_tokens: false }).ids.length,
    });
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
