#!/usr/bin/env bash
# Builds CAF 0.17.6 (core and io) with ThreadSanitizer into build-caf-tsan/prefix, from the source
# that Debian's libcaf-dev is built from (actor-framework_0.17.6.orig.tar.gz from Debian's
# archive, checked against the sha256 of Debian's .dsc). Debian's libcaf_core/libcaf_io are not
# instrumented: messages pass between threads through their atomics, which ThreadSanitizer then
# cannot see, and every message handed from one actor to another looks like a race. With this
# build, scripts/sanitize.sh tsan runs the actor and server suites too (docs/reliability.md).
#
# Usage: scripts/caf-tsan.sh        (does nothing when build-caf-tsan/prefix is complete)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD/build-caf-tsan
prefix=$root/prefix
version=0.17.6
tarball=actor-framework_$version.orig.tar.gz
sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
if [ -f "$prefix/done" ]; then
  exit 0
fi
command -v clang++ >/dev/null || {
  echo "caf-tsan: clang++ is missing: apt-get install clang" >&2
  exit 1
}
mkdir -p "$root"
if ! echo "$sha256  $root/$tarball" | sha256sum -c --quiet 2>/dev/null; then
  echo "caf-tsan: downloading $tarball from Debian's archive" >&2
  curl -fsS -o "$root/$tarball" \
    "http://deb.debian.org/debian/pool/main/a/actor-framework/$tarball"
  echo "$sha256  $root/$tarball" | sha256sum -c --quiet || {
    echo "caf-tsan: $tarball does not have the sha256 of Debian's actor-framework_$version .dsc" >&2
    exit 1
  }
fi
rm -rf "$root/src" "$root/build" "$prefix"
mkdir -p "$root/src"
tar xzf "$root/$tarball" -C "$root/src" --strip-components=1
# Debian's one change to the sources (its installed receive_buffer.hpp has it): <limits>, which
# newer libstdc++ no longer brings in through other headers.
sed -i 's|^#include <cstddef>$|#include <cstddef>\n#include <limits>|' \
  "$root/src/libcaf_io/caf/io/network/receive_buffer.hpp"
# libstdc++ as the rest of the project (CAF picks libc++ with clang unless told not to); only
# core and io; the same build_config.hpp as Debian's (log level quiet, memory management on).
export CCACHE_BASEDIR=$root
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S "$root/src" -B "$root/build" -G Ninja "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCAF_NO_AUTO_LIBCPP=yes -DCAF_NO_EXAMPLES=yes -DCAF_NO_TOOLS=yes -DCAF_NO_UNIT_TESTS=yes \
  -DCAF_NO_OPENCL=yes -DCAF_NO_OPENSSL=yes -DCAF_NO_PYTHON=yes -DCAF_NO_SUMMARY=yes \
  -DCAF_LOG_LEVEL=QUIET >&2
cmake --build "$root/build" -j "$(nproc)" >&2
cmake --install "$root/build" >&2
touch "$prefix/done"
echo "caf-tsan: CAF $version with ThreadSanitizer in $prefix" >&2
