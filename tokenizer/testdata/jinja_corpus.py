# The Python Jinja2 oracle for the chat-template corpus test
# (tokenizer/template_corpus_test.go): the environment transformers'
# apply_chat_template compiles templates in (ImmutableSandboxedEnvironment
# with trim_blocks, lstrip_blocks, loopcontrols and a {% generation %} tag
# that renders its body; tojson as json.dumps with ensure_ascii=False;
# raise_exception; strftime_now), which vLLM renders with.
#
# stdin and stdout as testdata/jinja_corpus.cjs; the environment variable
# PICOMETER_NOW (seconds since the epoch, UTC) is the time strftime_now formats.
import json
import os
import sys
from datetime import datetime, timezone

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


now = datetime.fromtimestamp(int(os.environ.get("PICOMETER_NOW", "0")), timezone.utc)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: now.strftime(f)

data = json.load(sys.stdin)
results = []
for t in data["templates"]:
    row = []
    try:
        tpl = env.from_string(t["source"])
        err = ""
    except Exception as e:
        tpl, err = None, "parse: %s: %s" % (type(e).__name__, e)
    for c in data["chats"]:
        if tpl is None:
            row.append({"out": "", "err": err})
            continue
        try:
            row.append({"out": tpl.render(**c), "err": ""})
        except Exception as e:
            row.append({"out": "", "err": "%s: %s" % (type(e).__name__, e) or "error"})
    results.append(row)
sys.stdout.write(json.dumps({"results": results}))
