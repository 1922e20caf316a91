#!/usr/bin/env bash
# Fetches and builds llama.cpp, the reference for Conveyor's GGUF support: its converter
# (convert_hf_to_gguf.py) and llama-quantize write the GGUF fixtures
# (tools/fixtures/make_gguf_models.py) and llama-server / llama-bench are what
# scripts/bench-gguf.sh measures Conveyor against. Never used by the test command: the tests read
# the committed fixtures.
#
# The source is the one shipped inside the PyPI source distribution of llama-cpp-python (its
# vendor/llama.cpp), checked against a pinned sha256 and kept in ~/.cache/conveyor/downloads/.
# It is extracted and built (Release, GGML_NATIVE, neither CURL nor OpenSSL) into
# ~/.cache/conveyor/llama.cpp-VERSION/:
#   src/    llama.cpp's source tree (convert_hf_to_gguf.py, gguf-py, ...)
#   build/  the CMake build
#   bin/    llama-server, llama-quantize, llama-bench
# Does nothing when that folder already holds a complete build of this version.
#
# Usage: scripts/fetch-llama-cpp.sh          prints the folder on its last line
#        JOBS=N scripts/fetch-llama-cpp.sh   build with N jobs (default: the number of cores)
set -euo pipefail
version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
url=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$version.tar.gz
cache=${XDG_CACHE_HOME:-$HOME/.cache}/conveyor
dest=$cache/llama.cpp-$version
stamp=$version+1
binaries=(llama-server llama-quantize llama-bench)

if [ "$(cat "$dest/.conveyor-version" 2>/dev/null)" = "$stamp" ]; then
  echo "$dest"
  exit 0
fi
for tool in curl tar cmake c++; do
  command -v "$tool" >/dev/null || {
    echo "fetch-llama-cpp: $tool is needed" >&2
    exit 1
  }
done

tarball=$cache/downloads/llama_cpp_python-$version.tar.gz
mkdir -p "$cache/downloads"
if ! echo "$sha256  $tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
  echo "fetch-llama-cpp: downloading llama-cpp-python $version's source distribution from PyPI" >&2
  curl -fsS --retry 3 -o "$tarball.part" "$url"
  echo "$sha256  $tarball.part" | sha256sum -c --quiet || {
    echo "fetch-llama-cpp: llama_cpp_python-$version.tar.gz does not have the pinned sha256" >&2
    rm -f "$tarball.part"
    exit 1
  }
  mv "$tarball.part" "$tarball"
fi

rm -rf "$dest"
mkdir -p "$dest/src"
echo "fetch-llama-cpp: extracting llama.cpp into $dest/src" >&2
tar xzf "$tarball" -C "$dest/src" --strip-components=3 \
  "llama_cpp_python-$version/vendor/llama.cpp"
[ -f "$dest/src/convert_hf_to_gguf.py" ] || {
  echo "fetch-llama-cpp: the source distribution has no vendor/llama.cpp" >&2
  exit 1
}

jobs=${JOBS:-$(nproc)}
echo "fetch-llama-cpp: building ${binaries[*]} with $jobs jobs (log: $dest/build.log)" >&2
{
  cmake -S "$dest/src" -B "$dest/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON &&
    cmake --build "$dest/build" -j "$jobs" --target "${binaries[@]}"
} >"$dest/build.log" 2>&1 || {
  echo "fetch-llama-cpp: the build failed; the end of $dest/build.log:" >&2
  tail -20 "$dest/build.log" >&2
  exit 1
}
mkdir -p "$dest/bin"
for b in "${binaries[@]}"; do
  [ -x "$dest/build/bin/$b" ] || {
    echo "fetch-llama-cpp: the build made no $b" >&2
    exit 1
  }
  ln -sfn "../build/bin/$b" "$dest/bin/$b"
done
echo "$stamp" >"$dest/.conveyor-version"
echo "$dest"
