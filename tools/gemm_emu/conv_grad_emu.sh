#!/bin/sh
# Runs the conv-grad programs (dgrad, wgrad, weight packing; the NCHW and channels-last entries)
# on the CPU emulator against a double reference: writes the programs with test_cuda_grad_ops
# (TGC_CG_EMIT_DIR), then builds conv_grad_emu.cpp once per (mode, tile variant) and runs it.
#   tools/gemm_emu/conv_grad_emu.sh BUILD_DIR
# ONLY="tf32-wgmma/128 simt" runs only those programs; FLIPS="0" one warp order.
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir with tests/test_cuda_grad_ops}
out=${TMPDIR:-/tmp}/tgc_cg_emu.$$
mkdir -p "$out"
TGC_CG_EMIT_DIR="$out" "$build/tests/test_cuda_grad_ops" > /dev/null 2>&1 || true
c++ -O1 -std=c++17 -c "$here/emu.cpp" -o "$out/emu.o"
fails=0
# mode variant threads rows name
for cfg in "0 0 256 128 simt" "1 0 256 128 tf32/128" "1 1 128 64 tf32/64" "2 0 256 128 bf16x/128" \
           "2 1 128 64 bf16x/64" "1 2 256 128 tf32-wgmma/128" "1 3 256 64 tf32-wgmma/64"; do
  set -- $cfg
  if [ -n "${ONLY:-}" ]; then
    case " $ONLY " in *" $5 "*) ;; *) continue ;; esac
  fi
  f="$out/cg_m$1_v$2.cu"
  [ -f "$f" ] || { echo "missing $f"; fails=$((fails + 1)); continue; }
  c++ -O1 -std=c++17 -w -DTGC_CASE="\"$f\"" -DTGC_MODE=$1 -DTGC_BM=$4 -DTGC_BN=128 -DTGC_NT=$3 \
      -DTGC_NAME="\"$5\"" -DTGC_WG_CL=$([ "$2" -ge 2 ] && echo 0 || echo 1) -I"$here" "$here/conv_grad_emu.cpp" "$out/emu.o" -lpthread \
      -o "$out/cg_$1_$2"
  for fl in ${FLIPS:-0 1}; do
    TGC_EMU_FLIP=$fl "$out/cg_$1_$2" || fails=$((fails + 1))
  done
done
echo "conv_grad_emu: $fails failing"
[ "$fails" = 0 ]
