#!/usr/bin/env bash
# One device command for the H200: `make test-gpu`, the GPU benchmarks and the PyTorch
# references, in one run, with a table of ratios in $OUT/summary.txt.
#
#   tests/gpu/device_run.sh [--quick] [--train] [--dist] [--gemm] [--no-tests] [--no-memcheck]
#                           [--no-bench] [--no-torch] [--torch-dir DIR] [--bert-static]
#
# Run it on the GPU machine from the repository root, with .deps beside it (made on the
# development machine by `make gpu-deps`: the cmocka .debs and a copy of the PyTorch reference
# scripts torch_ref.py and torch_graph_ref.py from SHARED_BENCH):
#   run(command="tests/gpu/device_run.sh", carry=[".deps"], timeout_s=600)
# The PyTorch scripts are looked for in --torch-dir, then .deps/torch.
#
# Phases, each under its own time budget (seconds; time a phase leaves unused passes to the
# next; the budgets add up to 535 s, so the whole run stays under 9 minutes):
#   tests      230  tests/gpu/test_gpu.sh --no-memcheck: build build-gpu (CUDA on, LLVM off,
#                   -Werror), ctest -L gpu, then the rest of the suite -> $OUT/test_gpu.log
#   memcheck    70  the longest gpu tests under compute-sanitizer memcheck, as many as 60 s
#                   allow (the rest "not run": the phase then reads failed); the full
#                   memcheck and racecheck run is tests/gpu/test_gpu.sh alone, one device
#                   command of its own                                 -> $OUT/memcheck.log
#   bench      100  build-gpu/tests/bench/bench_gpu                    -> $OUT/bench_gpu.log, .jsonl
#   torch_graph 45  torch_graph_ref.py (cnn resnet gemm bert: CUDA-graph captures, cuBLAS)
#                                                                      -> $OUT/torch_graph_ref.log
#   torch_ref   90  tests/gpu/torch_infer.py: torch_ref.py's inference benches (eager,
#                   torch.compile default, reduce-overhead) and its BERT sweep
#                                                                      -> $OUT/torch_ref.log
# --quick: only the build and `ctest -L gpu` (tests/gpu/test_gpu.sh --gpu-only --no-memcheck).
# --train: the training run instead (the training targets):
#   tests      200  build and `ctest -L gpu`                            -> $OUT/test_gpu.log
#   torch_graph 60  torch_graph_ref.py cnn resnet (whole-step CUDA graphs with fused Adam,
#                   TF32 and channels-last variants)                    -> $OUT/torch_graph_ref.log
#   torch_train 130 tests/gpu/torch_train.py: torch_ref.py's train_bench, eager, torch.compile
#                   default and reduce-overhead                          -> $OUT/torch_train.log
#   bench_train 150 bench_train --device cuda at HIGHEST and HIGH, with the PyTorch figures
#                   of this run as --torch-ref                          -> $OUT/bench_train.log
#   example     40  a short examples/train_cifar run on cuda:0 (synthetic data)
#                                                                       -> $OUT/train_cifar.log
# --dist: data-parallel training over NCCL, on every GPU the machine has (G =
# `nvidia-smi -L | wc -l`; the counts measured are 1 and G). TGC_NCCL_LIBRARY is pointed at
# the libnccl.so.2 of the Python packages (nvidia-nccl) when the loader cannot find one:
#   build       120 tests/gpu/test_gpu.sh --build-only                 -> $OUT/test_gpu.log
#   dist_tests   60 ctest -R 'test_(comm|ddp)_cuda' (world of one through the real NCCL,
#                   failure paths; --no-tests skips it)                -> $OUT/dist_tests.log
#   check        40 bench_ddp --check-losses (seed CNN, no batch norm, 50 SGD steps: N ranks
#                   with global batch 32 against one process with batch 32), and again with
#                   --accum 2                                          -> $OUT/bench_ddp.log
#   bench_ddp   220 bench_ddp --gpus G --counts 1,G (ResNet18 and the seed CNN at batch 64
#                   per GPU, DEFAULT and REDUCE_OVERHEAD, images/s per rank and total, scaling
#                   total(G)/total(1)) --torch-ref: tests/gpu/torch_ddp.py under torchrun on
#                   the same counts (eager DDP and torch.compile), ratios  -> $OUT/bench_ddp.log
#   example      60 examples/train_cifar --gpus G --max-steps 50 (global batch 64 G, synthetic
#                   data), then --accum 2 --mode reduce-overhead --max-steps 20
#                                                                       -> $OUT/train_cifar.log
# --gemm: the Hopper GEMM kernels with the warp-specialized TMA entry on (TGC_CUDA_TMA=1), and
# autotuning:
#   build       150 tests/gpu/test_gpu.sh --build-only                 -> $OUT/test_gpu.log
#   gemm_bench  120 bench_cuda_gemm all bert, all 4096, all r18: TFLOP/s of both entries,
#                   each checked against a double reference (ResNet18's convs NCHW and
#                   channels-last)                                     -> $OUT/gemm.log
#   cublas       45 tests/bench/torch_gemm_ref.py: cuBLAS on the same shapes -> $OUT/cublas.log
#   autotune     60 test_cuda_autotune                                 -> $OUT/autotune.log
#   gemm_check   60 bench_cuda_gemm quick: the other cases of both entries against a double
#                   reference (one NVRTC compile a case: as many as the budget allows)
#                                                                      -> $OUT/gemm.log
#   gpu_tests   120 ctest -L gpu                                       -> $OUT/test_gpu.log
#   sanitize     45 compute-sanitizer memcheck, then racecheck, on bench_cuda_gemm quick bert
#                   (the TMA entry, split-K included); memcheck on the channels-last convs
#                   (quick " cl")                                      -> $OUT/sanitize.log
# A phase cut by its budget is marked "timeout" in the summary; what it printed is kept.
# The files under $OUT stay within 8 (what a remote run brings back).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/gpu}
mkdir -p "$OUT"
quick=0 train=0 dist=0 gemm=0 tests=1 memcheck=1 bench=1 torch=1 torch_dir="" bert_static=""
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --train) train=1 ;;
    --dist) dist=1 ;;
    --gemm) gemm=1 ;;
    --no-tests) tests=0 ;;
    --no-memcheck) memcheck=0 ;;
    --no-bench) bench=0 ;;
    --no-torch) torch=0 ;;
    --torch-dir) torch_dir=$2; shift ;;
    --bert-static) bert_static=--bert-static ;;
    *) echo "device_run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
BUILD=${GPU_BUILD:-build-gpu}
PHASES=$OUT/phases.txt
: >"$PHASES"
carry=0
t_start=$(date +%s)

# run_phase NAME BUDGET LOGFILE COMMAND...: runs COMMAND under timeout, appending to LOGFILE.
run_phase() {
    local name=$1 budget=$2 log=$3
    shift 3
    local limit=$((budget + carry)) t0 rc status
    t0=$(date +%s)
    echo "==== device_run: $name (budget ${limit} s) -> $(basename "$log")"
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    local used=$(($(date +%s) - t0))
    case $rc in
    0) status=ok ;;
    124 | 137) status="timeout after ${limit} s" ;;
    *) status="failed (rc $rc)" ;;
    esac
    carry=$((limit - used > 0 ? limit - used : 0))
    echo "$name $used $status" >>"$PHASES"
    echo "==== device_run: $name: $status, $used s"
    tail -n 15 "$log"
    return $rc
}

if [ $quick = 1 ]; then
    run_phase tests 300 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --gpu-only --no-memcheck
    rc=$?
    cat "$PHASES"
    exit $rc
fi

find_torch() {
    for d in "$torch_dir" .deps/torch; do
        if [ -n "$d" ] && [ -f "$d/torch_ref.py" ] && [ -f "$d/torch_graph_ref.py" ]; then
            torch_dir=$d
            return 0
        fi
    done
    return 1
}

if [ $dist = 1 ]; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    [ "$ngpu" -ge 1 ] || ngpu=1
    counts=1
    [ "$ngpu" -gt 1 ] && counts=1,$ngpu
    if [ -z "${TGC_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
        nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
        [ -f "$nccl" ] && export TGC_NCCL_LIBRARY=$nccl
    fi
    echo "device_run --dist: $ngpu GPUs (counts $counts); NCCL: ${TGC_NCCL_LIBRARY:-libnccl.so.2 found by the dynamic loader}" |
        tee -a "$OUT/bench_ddp.log"
    run_phase build 120 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --build-only
    if [ $tests = 1 ]; then
        # the tests link cmocka, which test_gpu.sh may have unpacked into /tmp/cm
        cm=$(find /tmp/cm -name 'libcmocka.so*' 2>/dev/null | head -n1)
        run_phase dist_tests 60 "$OUT/dist_tests.log" env \
            LD_LIBRARY_PATH="${cm:+$(dirname "$cm"):}${LD_LIBRARY_PATH:-}" \
            bash -c "cd $BUILD && ctest -R 'test_(comm|ddp)_cuda' --output-on-failure"
    fi
    run_phase check 40 "$OUT/bench_ddp.log" bash -c "
        $BUILD/tests/bench/bench_ddp --check-losses --gpus $ngpu --counts $counts --timeout 30
        $BUILD/tests/bench/bench_ddp --check-losses --gpus $ngpu --counts $counts --timeout 30 \
            --accum 2"
    torch_flag=""
    [ $torch = 1 ] && python3 -c 'import torch' 2>/dev/null && torch_flag=--torch-ref
    [ -n "$torch_flag" ] || echo "device_run --dist: no PyTorch reference (--no-torch, or no torch)" |
        tee -a "$OUT/bench_ddp.log"
    run_phase bench_ddp 220 "$OUT/bench_ddp.log" "$BUILD/tests/bench/bench_ddp" --gpus "$ngpu" \
        --counts "$counts" --iters 30 --warmup 5 --timeout 60 $torch_flag
    run_phase example 60 "$OUT/train_cifar.log" bash -c "
        $BUILD/examples/train_cifar --gpus $ngpu --model cnn --data /tmp/cifar-dist-synthetic \
            --synthetic-train 10000 --synthetic-test 2000 --batch $((64 * ngpu)) --max-steps 50 \
            --report 10 --timeout 30 --checkpoint /tmp/cifar-dist-cnn.safetensors &&
        $BUILD/examples/train_cifar --gpus $ngpu --model cnn --data /tmp/cifar-dist-synthetic \
            --batch $((64 * ngpu)) --accum 2 --mode reduce-overhead --max-steps 20 --report 10 \
            --timeout 30"
    echo "total $(($(date +%s) - t_start)) -" >>"$PHASES"
    grep -h '^summary\|^check .*->\|^total' "$OUT/bench_ddp.log" "$OUT/train_cifar.log" 2>/dev/null
    cat "$PHASES"
    exit 0
fi

if [ $gemm = 1 ]; then
    export TGC_CUDA_TMA=1
    G=$BUILD/tests/bench/bench_cuda_gemm
    run_phase build 150 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --build-only
    # the tests link cmocka, which test_gpu.sh may have unpacked into /tmp/cm
    cm=$(find /tmp/cm -name 'libcmocka.so*' 2>/dev/null | head -n1)
    export LD_LIBRARY_PATH="${cm:+$(dirname "$cm"):}${LD_LIBRARY_PATH:-}"
    run_phase gemm_bench 120 "$OUT/gemm.log" bash -c "$G all bert && $G all 4096 && $G all r18"
    [ $torch = 1 ] && run_phase cublas 45 "$OUT/cublas.log" python3 tests/bench/torch_gemm_ref.py
    run_phase autotune 60 "$OUT/autotune.log" "$BUILD/tests/test_cuda_autotune"
    run_phase gemm_check 60 "$OUT/gemm_quick.log" "$G" quick
    [ $tests = 1 ] && run_phase gpu_tests 120 "$OUT/test_gpu.log" \
        bash -c "cd $BUILD && ctest -L gpu -j 6 --output-on-failure"
    [ $memcheck = 1 ] && run_phase sanitize 45 "$OUT/sanitize.log" bash -c "
        compute-sanitizer --tool memcheck $G quick bert &&
        compute-sanitizer --tool racecheck $G quick bert &&
        compute-sanitizer --tool memcheck $G quick ' cl'"
    echo "total $(($(date +%s) - t_start)) -" >>"$PHASES"
    grep -h 'FAIL\|TFLOP' "$OUT/gemm.log" "$OUT/gemm_quick.log" | cut -c1-200
    cat "$PHASES"
    exit 0
fi

if [ $train = 1 ]; then
    if [ $tests = 1 ]; then
        run_phase tests 200 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --gpu-only --no-memcheck
    else
        run_phase build 90 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --build-only
    fi
    refs=()
    if [ $torch = 1 ] && find_torch; then
        run_phase torch_graph 60 "$OUT/torch_graph_ref.log" \
            python3 "$torch_dir/torch_graph_ref.py" /tmp/torch-graph-out cnn resnet
        run_phase torch_train 130 "$OUT/torch_train.log" \
            python3 tests/gpu/torch_train.py "$torch_dir/torch_ref.py" /tmp/torch-train-out
        refs=(--torch-ref "$OUT/torch_graph_ref.log" --torch-ref "$OUT/torch_train.log")
    fi
    run_phase bench_train 150 "$OUT/bench_train.log" bash -c "
        $BUILD/tests/bench/bench_train --device cuda --precision highest --iters 30 --budget 8 \
            --only cnn,resnet18,epoch ${refs[*]} --json $OUT/bench_train_highest.json
        $BUILD/tests/bench/bench_train --device cuda --precision high --iters 30 --budget 8 \
            --only cnn,resnet18 ${refs[*]} --json $OUT/bench_train_high.json"
    run_phase example 40 "$OUT/train_cifar.log" "$BUILD/examples/train_cifar" --model cnn \
        --device cuda --data /tmp/cifar-synthetic --epochs 1 --max-steps 300 --report 100 \
        --checkpoint /tmp/cifar-cnn.safetensors
    echo "total $(($(date +%s) - t_start)) -" >>"$PHASES"
    cat "$PHASES"
    exit 0
fi

if [ $tests = 1 ]; then
    run_phase tests 230 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --no-memcheck
else
    run_phase build 90 "$OUT/test_gpu.log" tests/gpu/test_gpu.sh --build-only
fi
if [ $memcheck = 1 ]; then
    MEMCHECK_BUDGET=60 run_phase memcheck 70 "$OUT/memcheck.log" tests/gpu/test_gpu.sh --memcheck-only
fi
if [ $bench = 1 ]; then
    run_phase bench 100 "$OUT/bench_gpu.log" "$BUILD/tests/bench/bench_gpu" --iters 50 --budget 2 \
        --json "$OUT/bench_gpu.jsonl"
fi
if [ $torch = 1 ]; then
    for d in "$torch_dir" .deps/torch; do
        if [ -n "$d" ] && [ -f "$d/torch_ref.py" ] && [ -f "$d/torch_graph_ref.py" ]; then
            torch_dir=$d
            break
        fi
    done
    if [ ! -f "$torch_dir/torch_ref.py" ]; then
        echo "device_run: torch_ref.py / torch_graph_ref.py not found (--torch-dir DIR, or" \
            "'make gpu-deps' here and carry .deps)" | tee -a "$OUT/torch_ref.log"
        echo "torch_refs 0 missing-scripts" >>"$PHASES"
    else
        run_phase torch_graph 45 "$OUT/torch_graph_ref.log" \
            python3 "$torch_dir/torch_graph_ref.py" /tmp/torch-graph-out cnn resnet gemm bert
        run_phase torch_ref 90 "$OUT/torch_ref.log" \
            python3 tests/gpu/torch_infer.py "$torch_dir/torch_ref.py" /tmp/torch-ref-out $bert_static
    fi
fi
echo "total $(($(date +%s) - t_start)) -" >>"$PHASES"
python3 tests/gpu/summarize.py "$OUT/bench_gpu.jsonl" "$OUT/torch_graph_ref.log" \
    "$OUT/torch_ref.log" "$PHASES" >"$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
