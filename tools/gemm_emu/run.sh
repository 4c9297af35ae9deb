#!/bin/sh
# Runs template kernels on the CPU emulator: writes the cases with bench_cuda_gemm emit, then
# builds and runs each, once per warp order (TGC_EMU_FLIP 0 and 1: see emu.h; FLIPS="0" for
# one run), and prints ok / FAIL per case and order.
#   tools/gemm_emu/run.sh BUILD_DIR [case numbers...]
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir with tests/bench/bench_cuda_gemm}
shift
out=${TMPDIR:-/tmp}/tgc_gemm_emu.$$
mkdir -p "$out"
"$build/tests/bench/bench_cuda_gemm" emit "$out" > /dev/null
c++ -O1 -std=c++17 -c "$here/emu.cpp" -o "$out/emu.o"
cases=${*:-$(cd "$out" && ls case*.cu | grep -v nvrtc | sed 's/case0*\([0-9][0-9]*\)\.cu/\1/')}
fails=0
for i in $cases; do
  f=$(printf "%s/case%02d.cu" "$out" "$i")
  [ -f "$f" ] || continue
  if c++ -O1 -std=c++17 -w -DTGC_CASE="\"$f\"" -I"$here" "$here/emu_main.cpp" "$out/emu.o" \
        -lpthread -o "$out/case$i" 2> "$out/case$i.log"; then
    for fl in ${FLIPS:-0 1}; do
      TGC_EMU_FLIP=$fl "$out/case$i" || fails=$((fails + 1))
    done
  else
    echo "case $i: does not build:"; head -20 "$out/case$i.log"; fails=$((fails + 1))
  fi
done
echo "gemm_emu: $fails failing"
[ "$fails" = 0 ]
