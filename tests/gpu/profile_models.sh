#!/usr/bin/env bash
# Where the GPU time of a compiled model goes: runs the examples on tgc_cuda(0) with
# TGC_PROFILE=1 (each step of a compiled call waited for and timed, src/backend/exec.c) and
# sums the steps by kind (loop kernels, matmul / linear / conv2d templates, native ops by op
# name) over every compiled call and eager op of the run: total ms, share, step count. Needs
# a GPU; not run by ctest.
#   tests/gpu/profile_models.sh [--train] [BUILD_DIR]   (default build-gpu)
# --train: the training steps instead (examples/train_cifar, the seed CNN and ResNet18, 8
# compiled steps at HIGH on a synthetic set, then the evaluation), summed the same way over
# the steps after the first three (which compile and load programs).
set -uo pipefail
cd "$(dirname "$0")/../.."
train=0
if [ "${1:-}" = --train ]; then
    train=1
    shift
fi
B=${1:-build-gpu}
agg() {
    # a call starts where the step index does not grow; the first $SKIP calls (compiles,
    # first-use program loads) are left out of the sums
    local f
    f=$(mktemp)
    awk -v skip="${SKIP:-0}" 'BEGIN { last = 1e9; call = -1 }
         /tgc profile: step/ {
             if ($4 + 0 <= last) call++
             last = $4 + 0
             if (call >= skip) print call, $5, $6 }' > "$f"
    awk -v skip="${SKIP:-0}" '{ tot += $3; if (!($1 in seen)) { seen[$1] = 1; n++ } }
         END { printf "  %d calls summed (the first %d left out): %.3f ms per call\n", n, skip,
               n ? tot / n : 0 }' "$f"
    awk '{ s[$2] += $3; c[$2]++; tot += $3 }
         END { for (k in s) printf "  %-30s %9.3f ms  %5.1f%%  (%d steps)\n", k, s[k],
               (tot > 0 ? 100 * s[k] / tot : 0), c[k] }' "$f" | sort -k2 -nr
    rm -f "$f"
}
run() {
    echo "== $*"
    TGC_PROFILE=1 timeout 120 "$@" 2>&1 >/dev/null | agg
}
if [ $train = 1 ]; then
    data=$(mktemp -d)
    for m in cnn resnet18; do
        SKIP=3 run "$B/examples/train_cifar" --model $m --device cuda --precision high --max-steps 8 \
            --data "$data" --synthetic-train 1024 --synthetic-test 64
    done
    rm -rf "$data"
    exit 0
fi
run "$B/examples/bert" --device cuda --precision high --batch 8 --iters 3 --warmup 1 --no-sweep
run "$B/examples/resnet18" --device cuda --precision high --batch 64 --iters 3 --warmup 1
run "$B/examples/seed_cnn" --device cuda --precision high
