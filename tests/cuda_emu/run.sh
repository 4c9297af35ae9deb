#!/bin/sh
# Runs tests/unit/test_cuda_ops.c's GPU tests (and test_cuda_grad_ops.c's: the backward ops'
# native kernels) on the CPU emulation of the native-op kernels (emu_kernels.cpp). Needs a
# configured build folder with libtgc_static (default build-hd).
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-hd}
out=$build/cuda_emu
mkdir -p "$out"
inc="-I$root/src -I$root -I$root/include -I$root/tests -I$root/tests/unit -I/usr/local/cuda/include"
g++ -std=c++20 -O1 -g -w $inc -c "$root/tests/cuda_emu/emu_kernels.cpp" -o "$out/emu_kernels.o"
gcc -std=c11 -O1 -g -D_GNU_SOURCE -DTGC_HAVE_CUDA=1 $inc -c "$root/tests/cuda_emu/emu_launch.c" \
    -o "$out/emu_launch.o"
gcc -std=c11 -O1 -g -D_GNU_SOURCE -DTGC_HAVE_CUDA=1 -DTGC_CUDA_OPS_EMU=1 $inc \
    -c "$root/tests/unit/test_cuda_ops.c" -o "$out/test_cuda_ops_emu.o"
lib=$build/libtgc.a
g++ -o "$out/test_cuda_ops_emu" "$out/test_cuda_ops_emu.o" "$out/emu_kernels.o" "$out/emu_launch.o" "$lib" \
    $(pkg-config --libs cmocka) -fopenmp -lpthread -ldl -lm
CMOCKA_MESSAGE_OUTPUT=stdout "$out/test_cuda_ops_emu"
gcc -std=c11 -O1 -g -D_GNU_SOURCE -DTGC_HAVE_CUDA=1 -DTGC_CUDA_OPS_EMU=1 $inc \
    -c "$root/tests/unit/test_cuda_grad_ops.c" -o "$out/test_cuda_grad_ops_emu.o"
g++ -o "$out/test_cuda_grad_ops_emu" "$out/test_cuda_grad_ops_emu.o" "$out/emu_kernels.o" \
    "$out/emu_launch.o" "$lib" $(pkg-config --libs cmocka) -fopenmp -lpthread -ldl -lm
CMOCKA_MESSAGE_OUTPUT=stdout "$out/test_cuda_grad_ops_emu"
