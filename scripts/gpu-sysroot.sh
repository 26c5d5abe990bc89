#!/usr/bin/env bash
# shellcheck disable=SC2016 # the ${...} written into the .pc files are pkg-config's variables
# Collects what scripts/gpu-check.sh needs to build on a GPU machine that lacks development
# packages (no jansson, cminpack, libmicrohttpd or SQLite headers, no cminpack library): their
# headers, pkg-config files (relocatable: prefix from the .pc file's own folder) and the shared
# libraries the client side links, from this (Debian) machine's packages; and, as a fallback for
# a compiler that refuses the build, libperseus.so, gpu_probe and gpu_attrib built here.
#
# usage: scripts/gpu-sysroot.sh [DIR]   (default build-gpu-sysroot, ignored by git: give it to
#                                        the machine as it is, then PRS_GPU_SYSROOT=DIR there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-gpu-sysroot}
multi=/usr/lib/x86_64-linux-gnu
rm -rf "$out"
mkdir -p "$out/include" "$out/lib/pkgconfig" "$out/prebuilt"
cp -a /usr/include/jansson.h /usr/include/jansson_config.h /usr/include/cminpack-1 \
  /usr/include/microhttpd.h /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$out/include/"
cp -a "$multi"/libjansson.so* "$multi"/libcminpack.so* "$out/lib/"
# The .pc files, relocated: ${pcfiledir} is the folder of the .pc file (pkg-config and pkgconf).
pc() { # name version cflags libs
  printf 'prefix=${pcfiledir}/../..\nincludedir=${prefix}/include\nlibdir=${prefix}/lib\n\n' \
    >"$out/lib/pkgconfig/$1.pc"
  printf 'Name: %s\nDescription: %s (gpu-check sysroot)\nVersion: %s\nCflags: %s\nLibs: %s\n' \
    "$1" "$1" "$2" "$3" "$4" >>"$out/lib/pkgconfig/$1.pc"
}
pc jansson "$(pkg-config --modversion jansson)" '-I${includedir}' '-L${libdir} -ljansson'
pc cminpack "$(pkg-config --modversion cminpack)" '-I${includedir}/cminpack-1' \
  '-L${libdir} -lcminpack'
# perseusd's libraries: configuring needs them found; gpu-check.sh does not build perseusd.
pc libmicrohttpd "$(pkg-config --modversion libmicrohttpd)" '-I${includedir}' '-lmicrohttpd'
pc sqlite3 "$(pkg-config --modversion sqlite3)" '-I${includedir}' '-lsqlite3'
b=$out/prebuilt/build
cmake -S "$root" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPRS_BUILD_TESTS=OFF \
  -DPRS_BUILD_FUZZ=OFF >/dev/null
nice cmake --build "$b" --target perseus_shared gpu_probe gpu_attrib -j2 >/dev/null
mkdir -p "$out/prebuilt/bench"
cp -a "$b"/libperseus.so* "$out/prebuilt/"
cp -a "$b/bench/gpu_probe" "$b/bench/gpu_attrib" "$out/prebuilt/bench/"
rm -rf "$b"
strip "$out"/prebuilt/bench/* "$out"/prebuilt/libperseus.so.*.* 2>/dev/null || true
du -sh "$out"
