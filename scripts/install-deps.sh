#!/usr/bin/env bash
# Install the Debian packages needed to build and test Perseus (idempotent).
# Usage: scripts/install-deps.sh [--runtime]
#   --runtime  only what building the programs and the library needs (docs/install.md), not the
#              tests, benchmarks, fuzzing and lint tools
set -euo pipefail
runtime=0
for a in "$@"; do
  case "$a" in
    --runtime) runtime=1 ;;
    *) echo "scripts/install-deps.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
pkgs=(build-essential cmake ninja-build pkg-config
      libcminpack-dev libmicrohttpd-dev libjansson-dev libsqlite3-dev libcurl4-openssl-dev)
if ((!runtime)); then
  # groff-base: the installed-tree test renders the man pages; python3-venv, -setuptools and
  # -wheel: it pip-installs the Python package (tests/cli/install.sh); prometheus: promtool
  # checks perseusd's /metrics (tests/cli/metrics.sh); openssl: makes the certificates of the
  # TLS test (tests/client/test_tls.c); GLPK and CBC: the exact references (tests/ref/); lintian:
  # checks the Debian packages (tests/cli/package.sh); curl and jq: the shell tests that talk to
  # perseusd and perseus-router.
  pkgs+=(clang libclang-rt-14-dev clang-format clang-tidy libcmocka-dev libglpk-dev
         coinor-libcbc-dev libxml2-utils librsvg2-bin groff-base python3-venv python3-setuptools
         python3-wheel python3-torch prometheus openssl lintian curl jq)
fi
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
