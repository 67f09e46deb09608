"""Hugging Face's reference token counts for the real-model tests.

Reads JSON on stdin: {"model": GGUF path, "chats": [[{role, content}, ...], ...],
"texts": [str, ...]} and writes JSON on stdout: {"chat_tokens": [n, ...] (the
chat rendered by transformers' apply_chat_template with the GGUF's own
tokenizer.chat_template and add_generation_prompt, then tokenized),
"text_tokens": [n, ...] (each text tokenized as is, a special token's text in
it read as that special token, as Hugging Face, vLLM and llama-server read a
raw prompt and picometer's /v1/completions does, daemon/doc.go), "versions":
{...}}. No special tokens are added
beyond what the template writes.

The tokenizer is transformers' conversion of the GGUF's tokenizer metadata
into a tokenizers (Rust) fast tokenizer. transformers refuses to read a GGUF
without torch even when no tensor is read (return_tensors=False reads only
metadata), so its availability check is answered for that one module: no
torch is installed or imported.
"""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"

import transformers.modeling_gguf_pytorch_utils as gguf_utils  # noqa: E402

gguf_utils.is_torch_available = lambda: True  # metadata only; see above

import jinja2  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402


def main():
    req = json.load(sys.stdin)
    d, f = os.path.split(os.path.abspath(req["model"]))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    if not tok.chat_template:
        sys.exit("hf_oracle: the GGUF has no chat template")
    out = {"chat_tokens": [], "text_tokens": [], "versions": {
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "jinja2": jinja2.__version__,
    }}
    for msgs in req.get("chats", []):
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        out["chat_tokens"].append(len(tok(text, add_special_tokens=False)["input_ids"]))
    for text in req.get("texts", []):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out["text_tokens"].append(len(ids))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
