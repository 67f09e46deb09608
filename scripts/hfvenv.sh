#!/usr/bin/env bash
# make deps (hf group): a Python venv at build/pyvenv with the packages
# tools/pypi/requirements.txt pins (transformers, tokenizers, jinja2, gguf and
# their dependencies; no torch), the Hugging Face oracle of the real-model
# tests (e2e/testdata/hf_oracle.py). Reinstalled only when the requirements
# change (build/pyvenv/.installed is a copy of them written after success).
set -euo pipefail
cd "$(dirname "$0")/.."

req=tools/pypi/requirements.txt
venv=build/pyvenv
if cmp -s "$req" "$venv/.installed" 2>/dev/null; then
	exit 0
fi
command -v python3 >/dev/null || { echo "hfvenv: python3 is missing (apt-get install python3 python3-venv)" >&2; exit 1; }
echo "hfvenv: PyPI packages ($req) into $venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$req" >&2
cp "$req" "$venv/.installed"
