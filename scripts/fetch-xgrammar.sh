#!/usr/bin/env bash
# Fetches the source of xgrammar, the grammar engine of structured outputs, into
# third_party/xgrammar/ (its C++ core builds with the project: cmake/ConveyorXgrammar.cmake).
# The source distribution comes from PyPI (the wheel has no headers), checked against a pinned
# sha256; the tarball is kept in ~/.cache/conveyor/downloads/ for the next clone. Does nothing
# when third_party/xgrammar/ already holds this version.
#
# Usage: scripts/fetch-xgrammar.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.2.9
sha256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90
url=https://files.pythonhosted.org/packages/3a/2f/5bf8e8fa6619cff534932f79b0abc81a417d354bc5093252c1a6081d0a93/xgrammar-$version.tar.gz
dest=third_party/xgrammar
# The version and Conveyor's patches to it (below): a new patch fetches the source anew.
stamp=$version+2
if [ "$(cat "$dest/.conveyor-version" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/conveyor/downloads
tarball=$cache/xgrammar-$version.tar.gz
mkdir -p "$cache"
if ! echo "$sha256  $tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
  echo "fetch-xgrammar: downloading xgrammar $version's source distribution from PyPI" >&2
  curl -fsS --retry 3 -o "$tarball.part" "$url"
  echo "$sha256  $tarball.part" | sha256sum -c --quiet || {
    echo "fetch-xgrammar: xgrammar-$version.tar.gz does not have the pinned sha256" >&2
    rm -f "$tarball.part"
    exit 1
  }
  mv "$tarball.part" "$tarball"
fi
rm -rf "$dest"
mkdir -p "$dest"
# Only what the C++ core needs: its headers, sources and the two header-only dependencies.
tar xzf "$tarball" -C "$dest" --strip-components=1 \
  "xgrammar-$version/include" "xgrammar-$version/cpp" "xgrammar-$version/3rdparty/picojson" \
  "xgrammar-$version/3rdparty/dlpack" "xgrammar-$version/LICENSE" "xgrammar-$version/NOTICE"
# Conveyor's patches, each found by a test of ours:
# - xgrammar-json-string-controls.patch: a JSON string with minLength or maxLength admitted raw
#   control characters (0x00 to 0x1f), which JSON forbids inside strings, so a model could write
#   a document that no JSON parser reads (tests/grammar/'s random walks). Such strings now
#   exclude them, as xgrammar's other strings do.
# - xgrammar-hex-escape-overflow.patch: a grammar's "\x" escape read any number of hex digits
#   into an int, overflowing it (undefined behaviour) on a long run (fuzz/output_format_fuzz).
#   An escape past the last code point is now an invalid escape, which the grammar's parser
#   reports.
for p in scripts/xgrammar-json-string-controls.patch scripts/xgrammar-hex-escape-overflow.patch; do
  patch -s -p1 -d "$dest" <"$p" || {
    echo "fetch-xgrammar: $p does not apply" >&2
    exit 1
  }
done
echo "$stamp" >"$dest/.conveyor-version"
