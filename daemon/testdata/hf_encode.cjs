// Hugging Face's tokenizer on prompts, as vLLM tokenizes a completions
// prompt (tokenizer(prompt): the model's special tokens added, the text of
// added tokens in the prompt read as those tokens). Run by
// daemon/prompt_special_test.go with NODE_PATH at build/npm/node_modules.
//
// stdin: {"model": "llama3", "texts": [...]}   stdout: [[ids...], ...]
"use strict";
const { Tokenizer } = require("@huggingface/tokenizers");

const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const dir = require.resolve(`@lenml/tokenizer-${input.model}/models/tokenizer.json`).replace(/tokenizer\.json$/, "");
const tk = new Tokenizer(require(dir + "tokenizer.json"), require(dir + "tokenizer_config.json"));
process.stdout.write(JSON.stringify(input.texts.map((t) => Array.from(tk.encode(t).ids))));
