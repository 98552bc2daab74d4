#!/usr/bin/env bash
# Builds one self-contained, statically linked steptrace binary to copy onto
# a node: glibc, libstdc++, libbpf, libelf and zlib from Debian's .a files,
# fmt header-only. Debian ships cpp-httplib only as a shared library, so its
# own source package (the upstream header-only httplib.h plus Debian's
# patches) is fetched with apt and compiled in.
# usage: sudo tools/build-static.sh [BUILD_DIR]   (default build-static)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build-static}
"$top/tools/setup-deps.sh"
deps=$build/_deps
mkdir -p "$deps/apt/lists/partial"
if [ ! -f "$deps/httplib/httplib.h" ]; then
  # A private deb-src list: the machine's apt configuration is left alone.
  cat > "$deps/apt/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(. /etc/os-release && echo "$VERSION_CODENAME")
Components: main
SRC
  apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$deps/apt" -o "Dir::State::Lists=$deps/apt/lists")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$deps" && apt-get "${apt_opts[@]}" source --download-only cpp-httplib 2>/dev/null)
  rm -rf "$deps/src" && mkdir -p "$deps/src" "$deps/httplib"
  tar xf "$deps"/cpp-httplib_*.orig.tar.* -C "$deps/src" --strip-components=1
  tar xf "$deps"/cpp-httplib_*.debian.tar.* -C "$deps/src"
  if [ -f "$deps/src/debian/patches/series" ]; then
    while read -r p; do
      [ -n "$p" ] && [ "${p#\#}" = "$p" ] && patch -s -d "$deps/src" -p1 < "$deps/src/debian/patches/$p"
    done < "$deps/src/debian/patches/series"
  fi
  cp "$deps/src/httplib.h" "$deps/httplib/httplib.h"
fi
cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPTRACE_STATIC=ON \
  -DSTEPTRACE_HTTPLIB_HEADER_DIR="$deps/httplib"
cmake --build "$build" -j"$(nproc)" --target steptrace
echo "built $build/user/steptrace"
