#!/usr/bin/env bash
# Installs the Debian packages only the operator benchmarks need (OpenBLAS for bench_sgemm,
# oneDNN for bench_conv), when any is missing. Never needed by the build, tests or CI: the
# benches print "not installed" for a missing library and still run. Needs root (or sudo)
# only when it installs.
set -euo pipefail
pkgs=(libopenblas-dev libdnnl-dev)
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
