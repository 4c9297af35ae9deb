#!/usr/bin/env bash
# Where the GPU time of a compiled model goes: runs the examples on tgc_cuda(0) with
# TGC_PROFILE=1 (each step of a compiled call waited for and timed, src/backend/exec.c) and
# sums the steps by kind (loop kernels, matmul / linear / conv2d templates, native ops by op
# name) over every compiled call and eager op of the run: total ms, share, step count. Needs
# a GPU; not run by ctest.
#   tests/gpu/profile_models.sh [BUILD_DIR]   (default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
agg() {
    awk '/tgc profile: step/ { s[$5] += $6; c[$5]++; tot += $6 }
         END { for (k in s) printf "  %-30s %9.3f ms  %5.1f%%  (%d steps)\n", k, s[k],
               (tot > 0 ? 100 * s[k] / tot : 0), c[k] }' | sort -k2 -nr
}
run() {
    echo "== $*"
    TGC_PROFILE=1 timeout 120 "$@" 2>&1 >/dev/null | agg
}
run "$B/examples/bert" --device cuda --precision high --batch 8 --iters 3 --warmup 1 --no-sweep
run "$B/examples/resnet18" --device cuda --precision high --batch 64 --iters 3 --warmup 1
run "$B/examples/seed_cnn" --device cuda --precision high
