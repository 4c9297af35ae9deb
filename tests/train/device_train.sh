#!/usr/bin/env bash
# One device command for the training pieces on the H200: build (CUDA on, LLVM off) the GPU
# training test, bench_train and train_cifar, run test_cuda_train_parity, bench_train on
# the GPU (fp32 and TF32) and a short train_cifar run, and PyTorch's whole-step CUDA-graph
# reference (torch_graph_ref.py cnn resnet) in the same run, logs under $OUT.
#
#   run(command="tests/train/device_train.sh", carry=[".deps"], timeout_s=600)
#
# .deps comes from `make gpu-deps SHARED_BENCH=<dir of torch_ref.py>` on the development
# machine (the cmocka .debs, torch_ref.py and torch_graph_ref.py). Options:
#   --no-test  --no-bench  --no-torch  --no-example
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/train}
mkdir -p "$OUT"
test=1 bench=1 torch=1 example=1
for a in "$@"; do
    case $a in
    --no-test) test=0 ;;
    --no-bench) bench=0 ;;
    --no-torch) torch=0 ;;
    --no-example) example=0 ;;
    *) echo "device_train.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
BUILD=${GPU_BUILD:-build-gpu-train}
JOBS=$(nproc)

# cmocka from .deps/cmocka (as tests/gpu/test_gpu.sh does)
if ! pkg-config --exists cmocka 2>/dev/null; then
    CM=/tmp/cm
    rm -rf "$CM" && mkdir -p "$CM"
    for d in .deps/cmocka/*.deb; do dpkg -x "$d" "$CM" || exit 1; done
    pc=$(find "$CM" -name cmocka.pc | head -n1)
    sed -i "s|^prefix=.*|prefix=$CM/usr|" "$pc"
    libdir=$(dirname "$(dirname "$pc")")
    export PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export CPATH=$CM/usr/include${CPATH:+:$CPATH}
    export LIBRARY_PATH=$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

t0=$(date +%s)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTGC_WITH_LLVM=OFF \
    -DTGC_WITH_CUDA=ON >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
targets="bench_train"
[ $test = 1 ] && targets="$targets test_cuda_train_parity"
cmake --build "$BUILD" -j "$JOBS" --target $targets >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ex=0
if [ $example = 1 ] && cmake --build "$BUILD" -j "$JOBS" --target train_cifar >>"$OUT/build.log" 2>&1; then
    ex=1
else
    echo "train_cifar did not build (see build.log)"
fi
echo "build: $(($(date +%s) - t0)) s"

if [ $test = 1 ]; then
    echo "==== test_cuda_train_parity"
    TGC_LOG= CMOCKA_MESSAGE_OUTPUT=stdout timeout 200 "$BUILD/tests/test_cuda_train_parity" \
        >"$OUT/test_cuda_train_parity.log" 2>&1
    echo "rc=$?"
    grep -E "^\[  (PASSED|FAILED|  OK|  ERROR) |ERROR:|  gpu |tolerance" "$OUT/test_cuda_train_parity.log" |
        head -80
fi
refs=()
if [ $torch = 1 ] && [ -f .deps/torch/torch_graph_ref.py ]; then
    echo "==== torch_graph_ref.py cnn resnet"
    timeout 120 python3 .deps/torch/torch_graph_ref.py "$OUT/torch" cnn resnet \
        >"$OUT/torch_graph_ref.log" 2>&1
    echo "rc=$?"
    grep train "$OUT/torch_graph_ref.log"
    [ -f "$OUT/torch/graph.json" ] && refs=(--torch-ref "$OUT/torch/graph.json")
fi
if [ $bench = 1 ]; then
    for p in highest high; do
        echo "==== bench_train --device cuda --precision $p"
        timeout 150 "$BUILD/tests/bench/bench_train" --device cuda --precision $p --iters 50 \
            --budget 10 --only cnn,resnet18$([ $p = high ] && echo ,epoch) \
            --data /tmp/tgc_cifar_synth "${refs[@]}" --json "$OUT/bench_train_$p.json" \
            2>&1 | tee "$OUT/bench_train_$p.log"
    done
fi
if [ $ex = 1 ]; then
    echo "==== train_cifar --device cuda --max-steps 300"
    timeout 90 "$BUILD/examples/train_cifar" --device cuda --precision high \
        --mode reduce-overhead --max-steps 300 --report 100 --data /tmp/tgc_cifar_synth \
        --checkpoint "$OUT/ck.safetensors" 2>&1 | tee "$OUT/train_cifar.log" | tail -20
    rm -f "$OUT"/ck*.safetensors
fi
echo "total: $(($(date +%s) - t0)) s"
