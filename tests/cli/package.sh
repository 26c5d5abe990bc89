#!/usr/bin/env bash
# The Debian packages (cmake/package.cmake) built from this build with CPack, as
# docs/install.md says: four packages with the files each should hold, the library's shlibs and
# ldconfig trigger and no maintainer scripts, the -dev package depending on the library of the
# same version, stripped programs, compressed manual pages, a copyright file and a changelog in
# each, and lintian (when installed) reporting no error and no warning.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v dpkg-deb >/dev/null || { echo "no dpkg-deb"; exit 77; }
[[ -f $bin/CPackConfig.cmake ]] || fail "no $bin/CPackConfig.cmake"
# The packages' paths are /usr's, whatever this build's own prefix.
(cd "$tmp" && cpack -G DEB --config "$bin/CPackConfig.cmake" -B "$tmp/out" \
  -D CPACK_PACKAGING_INSTALL_PREFIX=/usr) >"$tmp/cpack.log" 2>&1 ||
  fail "cpack: $(tail -n 5 "$tmp/cpack.log")"
version=$(sed -nE 's/^project\(perseus VERSION ([0-9.]+).*/\1/p' "${PRS_SOURCE_DIR:?}/CMakeLists.txt")
major=${version%%.*}
declare -A arch=([perseus]=amd64 [libperseus$major]=amd64 [libperseus-dev]=amd64 [python3-perseus]=all)
for p in "${!arch[@]}"; do
  deb=$tmp/out/${p}_${version}_${arch[$p]}.deb
  [[ $(dpkg --print-architecture) == amd64 || ${arch[$p]} == all ]] ||
    deb=$tmp/out/${p}_${version}_$(dpkg --print-architecture).deb
  [[ -f $deb ]] || fail "no package $(basename "$deb"): $(ls "$tmp/out")"
  dpkg-deb -c "$deb" | sed -E 's/ -> .*//' | awk '{print $NF}' | sed 's#^\./#/#' >"$tmp/$p.files"
  dpkg-deb -f "$deb" Package Version Depends Section >"$tmp/$p.control"
  grep -qx "/usr/share/doc/$p/copyright" "$tmp/$p.files" || fail "$p: no copyright file"
  grep -qx "/usr/share/doc/$p/changelog.gz" "$tmp/$p.files" || fail "$p: no changelog.gz"
  grep -q "^Version: $version$" "$tmp/$p.control" || fail "$p: version"
done
lib=libperseus$major
has() { grep -qE "$2" "$tmp/$1.files" || fail "$1 lacks $2"; }
hasnt() { ! grep -qE "$2" "$tmp/$1.files" || fail "$1 holds $2"; }
has perseus '^/usr/bin/perseus$'
has perseus '^/usr/bin/perseusd$'
has perseus '^/usr/bin/perseus-gpud$'
has perseus '^/usr/share/man/man1/perseus\.1\.gz$'
has perseus '^/usr/share/man/man8/perseusd\.8\.gz$'
has perseus '^/usr/lib/systemd/system/perseusd\.service$'
has perseus '^/usr/lib/systemd/system/perseus-gpud\.service$'
hasnt perseus 'libperseus|/include/|dist-packages'
has "$lib" "/libperseus\.so\.$major$"
hasnt "$lib" '/libperseus\.so$|\.a$|/include/|/bin/'
has libperseus-dev '/include/perseus/planner\.h$'
has libperseus-dev '/libperseus\.so$'
has libperseus-dev '/libperseus\.a$'
has libperseus-dev '/pkgconfig/perseus\.pc$'
has libperseus-dev '/cmake/Perseus/PerseusConfig\.cmake$'
hasnt libperseus-dev "/libperseus\.so\.$major"
has python3-perseus '^/usr/lib/python3/dist-packages/perseus/__init__\.py$'
grep -q "^Depends: .*$lib (= $version)" "$tmp/libperseus-dev.control" || fail "-dev's Depends"
grep -q "^Depends: .*python3" "$tmp/python3-perseus.control" || fail "python3-perseus's Depends"
grep -q "^Depends: .*$lib (= $version)" "$tmp/python3-perseus.control" ||
  fail "python3-perseus's Depends on the library"
# The library: shlibs and an ldconfig trigger, no maintainer scripts.
dpkg-deb -e "$tmp/out/${lib}_${version}_$(dpkg --print-architecture).deb" "$tmp/libctl"
grep -q "^libperseus $major $lib (>= $version)" "$tmp/libctl/shlibs" || fail "shlibs"
grep -qx "activate-noawait ldconfig" "$tmp/libctl/triggers" || fail "no ldconfig trigger"
[[ ! -e $tmp/libctl/postinst && ! -e $tmp/libctl/postrm ]] || fail "library package has scripts"
# Stripped programs, a readable manual page.
dpkg-deb -x "$tmp/out/perseus_${version}_$(dpkg --print-architecture).deb" "$tmp/root"
for p in perseus perseusd perseus-gpud; do
  ! readelf -S "$tmp/root/usr/bin/$p" | grep -q '\.debug_info\|\.symtab' || fail "$p not stripped"
done
gzip -dc "$tmp/root/usr/share/man/man1/perseus.1.gz" | grep -q '^\.TH' || fail "perseus.1.gz"
if command -v lintian >/dev/null; then
  # This build's prefix is not /usr, so its library folder is lib/, not Debian's multiarch one,
  # which is all pkg-config-unavailable-for-cross-compilation says: a build configured with
  # -DCMAKE_INSTALL_PREFIX=/usr (docs/install.md) puts perseus.pc in lib/<triplet>/pkgconfig.
  lintian --fail-on error,warning --suppress-tags pkg-config-unavailable-for-cross-compilation \
    "$tmp"/out/*.deb >"$tmp/lintian.log" 2>&1 ||
    fail "lintian: $(grep -E '^[EW]:' "$tmp/lintian.log" | head -n 20)"
  echo "lintian: no error or warning"
else
  echo "no lintian: packages not linted"
fi
echo "Debian packages OK: $(cd "$tmp/out" && ls ./*.deb | tr '\n' ' ')"
