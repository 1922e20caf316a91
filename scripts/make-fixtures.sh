#!/usr/bin/env bash
# Regenerates the committed test fixtures from the reference implementations on PyPI
# (transformers, tokenizers, safetensors, jinja2; pinned in tools/fixtures/requirements.txt),
# installed into the virtual environment tools/venv-fixtures (git-ignored). Each
# tools/fixtures/make_*.py writes its files under tests/fixtures/. Not part of the test command:
# the tests read the committed files, so running them needs neither PyPI nor this script.
# make_gguf_models.py also needs llama.cpp's converter and llama-quantize, which
# scripts/fetch-llama-cpp.sh fetches and builds first (LLAMA_CPP_DIR: a folder of them instead).
#
#   scripts/make-fixtures.sh            every generator
#   scripts/make-fixtures.sh NAME...    only tools/fixtures/make_NAME.py
set -euo pipefail
cd "$(dirname "$0")/.."
venv=tools/venv-fixtures
if ! cmp -s tools/fixtures/requirements.txt "$venv/requirements.txt"; then
  echo "make-fixtures: installing tools/fixtures/requirements.txt into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tools/fixtures/requirements.txt >&2
  cp tools/fixtures/requirements.txt "$venv/requirements.txt"
fi
generators=()
if [ $# -eq 0 ]; then
  generators=(tools/fixtures/make_*.py)
else
  for name in "$@"; do generators+=("tools/fixtures/make_$name.py"); done
fi
for g in "${generators[@]}"; do
  [ -f "$g" ] || { echo "make-fixtures: no $g" >&2; exit 2; }
  echo "make-fixtures: $g" >&2
  if [ "$(basename "$g")" = make_gguf_models.py ] && [ -z "${LLAMA_CPP_DIR:-}" ]; then
    LLAMA_CPP_DIR=$(scripts/fetch-llama-cpp.sh | tail -1)
    export LLAMA_CPP_DIR
  fi
  "$venv/bin/python" "$g"
done
