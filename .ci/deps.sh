#!/usr/bin/env bash
# Installs the Debian packages libtgc's build and tests need, when any is missing.
# Used by `make demo`, `make test` and CI; needs root (or sudo) only when it installs.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcmocka-dev llvm-19-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
