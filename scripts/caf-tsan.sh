#!/usr/bin/env bash
# Builds CAF 0.17.6 (core and io) with ThreadSanitizer, from the source that Debian's libcaf-dev
# is built from (actor-framework_0.17.6.orig.tar.gz from Debian's archive, checked against the
# sha256 of Debian's .dsc), and prints the folder it is installed in. Debian's
# libcaf_core/libcaf_io are not instrumented: messages pass between threads through their atomics,
# which ThreadSanitizer then cannot see, and every message handed from one actor to another looks
# like a race. With this build, scripts/sanitize.sh tsan runs the actor and server suites too
# (docs/reliability.md).
#
# The build does not change with a clone, so it is kept outside it, in
# ${XDG_CACHE_HOME:-~/.cache}/conveyor/caf-0.17.6-tsan-KEY, where KEY is a hash of the compiler's
# version and of this script: a new clone reuses it, a new clang or recipe builds another. The
# folder is written under another name and renamed when complete, with a stamp holding KEY; a
# folder without the stamp, or with another, is removed and built again. A lock keeps two runs
# from building at once.
#
# Usage: prefix=$(scripts/caf-tsan.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.17.6
tarball=actor-framework_$version.orig.tar.gz
sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
command -v clang++ >/dev/null || {
  echo "caf-tsan: clang++ is missing: apt-get install clang" >&2
  exit 1
}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/conveyor
key=$({ clang++ --version; cat "$0"; } | sha256sum | cut -c1-16)
prefix=$cache/caf-$version-tsan-$key

complete() {
  [ "$(cat "$prefix/conveyor-stamp" 2>/dev/null)" = "$key" ] &&
    [ -f "$prefix/lib/libcaf_core.so" ] && [ -f "$prefix/lib/libcaf_io.so" ] &&
    [ -f "$prefix/include/caf/all.hpp" ]
}
if complete; then
  echo "$prefix"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$prefix.lock"
flock 9
if complete; then # built by another run while this one waited
  echo "$prefix"
  exit 0
fi
if [ -e "$prefix" ]; then
  echo "caf-tsan: $prefix is incomplete or stale: building it again" >&2
  rm -rf "$prefix"
fi

downloads=$cache/downloads
mkdir -p "$downloads"
if ! echo "$sha256  $downloads/$tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
  echo "caf-tsan: downloading $tarball from Debian's archive" >&2
  curl -fsS --retry 3 -o "$downloads/$tarball.part" \
    "http://deb.debian.org/debian/pool/main/a/actor-framework/$tarball"
  echo "$sha256  $downloads/$tarball.part" | sha256sum -c --quiet || {
    echo "caf-tsan: $tarball does not have the sha256 of Debian's actor-framework_$version .dsc" >&2
    rm -f "$downloads/$tarball.part"
    exit 1
  }
  mv "$downloads/$tarball.part" "$downloads/$tarball"
fi
work=$(mktemp -d "$cache/caf-$version-tsan-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
tar xzf "$downloads/$tarball" -C "$work/src" --strip-components=1
# Debian's one change to the sources (its installed receive_buffer.hpp has it): <limits>, which
# newer libstdc++ no longer brings in through other headers.
sed -i 's|^#include <cstddef>$|#include <cstddef>\n#include <limits>|' \
  "$work/src/libcaf_io/caf/io/network/receive_buffer.hpp"
# libstdc++ as the rest of the project (CAF picks libc++ with clang unless told not to); only
# core and io; the same build_config.hpp as Debian's (log level quiet, memory management on).
echo "caf-tsan: building CAF $version with ThreadSanitizer into $prefix" >&2
export CCACHE_BASEDIR=$work
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S "$work/src" -B "$work/build" -G Ninja "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX="$work/prefix" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCAF_NO_AUTO_LIBCPP=yes -DCAF_NO_EXAMPLES=yes -DCAF_NO_TOOLS=yes -DCAF_NO_UNIT_TESTS=yes \
  -DCAF_NO_OPENCL=yes -DCAF_NO_OPENSSL=yes -DCAF_NO_PYTHON=yes -DCAF_NO_SUMMARY=yes \
  -DCAF_LOG_LEVEL=QUIET >&2
cmake --build "$work/build" -j "$(nproc)" >&2
cmake --install "$work/build" >&2
echo "$key" >"$work/prefix/conveyor-stamp"
mv "$work/prefix" "$prefix"
echo "caf-tsan: CAF $version with ThreadSanitizer in $prefix" >&2
echo "$prefix"
