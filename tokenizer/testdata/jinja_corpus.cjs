// The @huggingface/jinja oracle for the chat-template corpus test
// (tokenizer/template_corpus_test.go), run once per batch with NODE_PATH at
// build/npm/node_modules and TZ=UTC (strftime_now formats local time).
//
// stdin:  {"templates": [{"name": ..., "source": ...}, ...],
//          "chats": [{"messages": [...], "tools": [...]?, "add_generation_prompt": bool,
//                     "bos_token": ..., "eos_token": ...}, ...]}
// stdout: {"results": [[{"out": "...", "err": "..."}, ...one per chat], ...one per template]}
// err is "" when the template rendered; else the message Hugging Face raised
// (a template that does not parse raises on every chat).
"use strict";
const { Template } = require("@huggingface/jinja");

const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const results = [];
for (const t of input.templates) {
  const row = [];
  let tpl = null, parseErr = "";
  try {
    tpl = new Template(t.source);
  } catch (e) {
    parseErr = "parse: " + String(e.message || e);
  }
  for (const c of input.chats) {
    if (!tpl) {
      row.push({ out: "", err: parseErr });
      continue;
    }
    try {
      row.push({ out: tpl.render(c), err: "" });
    } catch (e) {
      row.push({ out: "", err: String(e.message || e) || "error" });
    }
  }
  results.push(row);
}
process.stdout.write(JSON.stringify({ results }));
