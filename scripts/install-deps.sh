#!/usr/bin/env bash
# Install the Debian packages needed to build and test Perseus (idempotent).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format clang-tidy
      libcmocka-dev libcminpack-dev libglpk-dev libxml2-utils librsvg2-bin
      libmicrohttpd-dev libjansson-dev libsqlite3-dev libcurl4-openssl-dev
      python3-torch)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
