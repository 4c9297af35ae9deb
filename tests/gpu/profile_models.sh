#!/usr/bin/env bash
# Where the GPU time of a compiled model goes: runs the examples on tgc_cuda(0) with
# TGC_PROFILE=1 (each step of a compiled call waited for and timed, src/backend/exec.c) and
# sums the steps by kind (loop kernels, matmul / linear / conv2d templates, native ops by op
# name), over the timed calls after the first (compile) call. Needs a GPU; not run by ctest.
#   tests/gpu/profile_models.sh [BUILD_DIR]   (default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
agg() {
    awk '/tgc profile: step/ { if ($4 == 0) calls++; if (calls > 1) { s[$5] += $6; c[$5]++ } }
         END { for (k in s) printf "  %-30s %9.3f ms per call  (%d steps per call)\n", k,
               s[k] / (calls - 1), c[k] / (calls - 1) }' | sort -k2 -nr
}
run() {
    echo "== $*"
    TGC_PROFILE=1 timeout 120 "$@" 2>&1 >/dev/null | agg
}
run "$B/examples/bert" --device cuda --precision high --batch 8 --iters 3 --warmup 1 --no-sweep
run "$B/examples/resnet18" --device cuda --precision high --batch 64 --iters 3 --warmup 1
run "$B/examples/seed_cnn" --device cuda --precision high
