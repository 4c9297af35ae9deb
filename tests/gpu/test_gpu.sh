#!/usr/bin/env bash
# `make test-gpu` and `make test-gpu-memcheck`: build and test libtgc on a GPU machine (an H200
# machine: Ubuntu 24.04, CUDA 13.0, 16 cores, no cmocka, no apt, no network, no LLVM
# dev files). The whole run fits in about 9 minutes there: build and tests about 230 s, then
# the sanitizer phases, each bounded by its budget (200 s memcheck, 90 s racecheck). Run it
# as one device command: `set -o pipefail; tests/gpu/test_gpu.sh 2>&1 | tee $OUT/test_gpu.log`
# (carry .deps).
#
#   tests/gpu/test_gpu.sh [--memcheck-only] [--racecheck-only] [--sanitize-only] [--no-memcheck]
#                         [--no-racecheck] [--no-sanitize] [--gpu-only] [--build-only]
#                         [--no-build] [--dry-run]
#
# Phases (each selectable; every one prints its seconds, and the end a table of them):
# 1. cmocka: when pkg-config finds it, nothing is done; else the .debs in .deps/cmocka/ (made on
#    the development machine by `make gpu-deps`: apt-get download libcmocka0 libcmocka-dev)
#    are unpacked with dpkg -x into /tmp/cm, cmocka.pc's prefix is pointed there, and
#    PKG_CONFIG_PATH, CPATH, LIBRARY_PATH and LD_LIBRARY_PATH are exported.
# 2. build: configures $GPU_BUILD (build-gpu) with -DTGC_WITH_LLVM=OFF -DTGC_WITH_CUDA=ON
#    -DTGC_WERROR=ON and builds it on every core (--no-build: use the build as it is);
# 3. tests: `ctest -L gpu --output-on-failure`, then the rest of the suite (`ctest -LE gpu`:
#    the gpu tests are not run twice; --gpu-only skips the rest);
# 4. memcheck: every `gpu`-labelled ctest entry (the shards of test_cuda_public and
#    test_cuda_train_parity are entries of their own) under `compute-sanitizer --tool
#    memcheck`, SANITIZE_JOBS (7) at a time, longest first (the times of phase 3), through
#    tests/gpu/sanitize_run.py, which prints each test's seconds and a summary. The phase
#    ends within MEMCHECK_BUDGET seconds (200; MEMCHECK_TIMEOUT per test, the budget by
#    default); test_cuda_public runs every MEMCHECK_STRIDE-th op case (1: all). Out-of-memory
#    answers of the driver (the deliberate out-of-memory tests) are expected API errors, not
#    failures; the NCCL process-group tests run with --report-api-errors no (NCCL probes its
#    kernels with calls that fail by design); every other report fails the test.
# 5. racecheck: `compute-sanitizer --tool racecheck` (shared-memory hazards) on the tests
#    whose name matches RACECHECK_TESTS: the GEMM / conv templates (test_cuda_gemm), the fused
#    attention (test_cuda_attention), the native kernels with block reductions
#    (test_cuda_ops: softmax, norms, losses) and every op's generated kernels, reductions
#    included (test_cuda_public's shards, every RACECHECK_STRIDE-th op case: 2), within
#    RACECHECK_BUDGET seconds (90; RACECHECK_TIMEOUT per test).
# --memcheck-only / --racecheck-only / --sanitize-only: the build (incremental) and that
# sanitizer phase / both only; --no-memcheck / --no-racecheck / --no-sanitize leave them out.
# --dry-run: phases 4 and 5 print the commands they would run (nothing is built or run; with
# GPU_BUILD=<a configured build> it works on any machine).
# A GPU test that skips (no usable GPU: "tgc: N GPU tests skipped: ...") fails this script,
# under the sanitizers too. With OUT set, the sanitizer summaries are also
# written to $OUT/sanitize_summary.txt. The script runs every selected phase and exits nonzero
# when one failed. Nothing here needs the network.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${GPU_BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
SANITIZE_JOBS=${SANITIZE_JOBS:-7}
MEMCHECK_BUDGET=${MEMCHECK_BUDGET:-200}
MEMCHECK_TIMEOUT=${MEMCHECK_TIMEOUT:-$MEMCHECK_BUDGET}
MEMCHECK_STRIDE=${MEMCHECK_STRIDE:-1}
# test_cuda_runtime_mock runs test_cuda_runtime against a host-memory stand-in for libcuda:
# no device code to check (test_cuda_runtime itself is in the phase)
MEMCHECK_EXCLUDE=${MEMCHECK_EXCLUDE:-'_mock$'}
RACECHECK_BUDGET=${RACECHECK_BUDGET:-90}
RACECHECK_TIMEOUT=${RACECHECK_TIMEOUT:-$RACECHECK_BUDGET}
RACECHECK_STRIDE=${RACECHECK_STRIDE:-2}
RACECHECK_TESTS=${RACECHECK_TESTS:-'^test_cuda_(gemm|attention|ops|public(_shard[0-9]+)?)$'}
memcheck=1 racecheck=1 tests=1 suite=1 build=1 dry_run=0
for a in "$@"; do
    case $a in
    --memcheck-only) tests=0 racecheck=0 ;;
    --racecheck-only) tests=0 memcheck=0 ;;
    --sanitize-only) tests=0 ;;
    --no-memcheck) memcheck=0 ;;
    --no-racecheck) racecheck=0 ;;
    --no-sanitize) memcheck=0 racecheck=0 ;;
    --gpu-only) suite=0 ;;
    --build-only) tests=0 memcheck=0 racecheck=0 ;;
    --no-build) build=0 ;;
    --dry-run) dry_run=1 tests=0 build=0 ;;
    *) echo "test_gpu.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
export PATH=$PATH:/usr/local/cuda/bin
failed=()
phase_times=()
phase_start=0
t_begin=$(date +%s)
begin() { phase_start=$(date +%s%N); echo "==== test-gpu: $1"; }
end() { # name rc
    local ms=$((($(date +%s%N) - phase_start) / 1000000)) line
    line=$(printf '%s: rc %s, %d.%01d s' "$1" "$2" $((ms / 1000)) $((ms % 1000 / 100)))
    echo "==== test-gpu: $line"
    phase_times+=("$line")
    [ "$2" = 0 ] || failed+=("$1")
}

# ---- 1. cmocka
if [ $dry_run = 1 ]; then
    : # nothing is built or run
elif pkg-config --exists cmocka 2>/dev/null; then
    echo "cmocka: $(pkg-config --modversion cmocka) found by pkg-config"
else
    debs=("$ROOT"/.deps/cmocka/*.deb)
    if [ ! -e "${debs[0]}" ]; then
        echo "test_gpu.sh: cmocka is not installed and .deps/cmocka/*.deb is missing:" >&2
        echo "  run 'make gpu-deps' on the development machine and carry .deps" >&2
        exit 1
    fi
    CM=/tmp/cm
    rm -rf "$CM" && mkdir -p "$CM"
    for d in "${debs[@]}"; do dpkg -x "$d" "$CM" || exit 1; done
    pc=$(find "$CM" -name cmocka.pc | head -n1)
    [ -n "$pc" ] || { echo "test_gpu.sh: no cmocka.pc in ${debs[*]}" >&2; exit 1; }
    sed -i "s|^prefix=.*|prefix=$CM/usr|" "$pc"
    libdir=$(dirname "$(dirname "$pc")")
    PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export PKG_CONFIG_PATH
    export CPATH=$CM/usr/include${CPATH:+:$CPATH}
    export LIBRARY_PATH=$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "cmocka: $(pkg-config --modversion cmocka) unpacked into $CM ($libdir)"
fi

# ---- 2. configure and build
if [ $build = 1 ]; then # an incremental build is quick
    begin "configure + build ($BUILD, $JOBS jobs)"
    mkdir -p "$BUILD"
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTGC_WITH_LLVM=OFF \
        -DTGC_WITH_CUDA=ON -DTGC_WERROR=ON >"$BUILD/configure.log" 2>&1 || {
        tail -n 40 "$BUILD/configure.log"
        echo "test-gpu: FAILED (configure)"
        exit 1
    }
    # keep going past a target that fails (a warning this host's compiler has and the
    # development machine's lacks): the rest still builds and runs, and the run fails at the end
    cmake --build "$BUILD" -j "$JOBS" -- -k
    rc=$?
    end build "$rc"
    [ "$rc" = 0 ] || echo "test-gpu: the build FAILED for some targets (above); testing what built"
fi

# ---- 3. the GPU tests, then everything
if [ $tests = 1 ]; then
    begin "ctest -L gpu"
    (cd "$BUILD" && ctest -L gpu --output-on-failure -j 6) | tee "$BUILD/gpu-tests.log"
    rc=${PIPESTATUS[0]}
    if (cd "$BUILD" && ctest -L gpu -N | grep -q "Total Tests: 0"); then
        echo "test-gpu: no test has the gpu label"; rc=1
    fi
    (cd "$BUILD" && grep -h "GPU tests skipped" Testing/Temporary/LastTest.log) && {
        echo "test-gpu: GPU tests were skipped on this machine (see the lines above)"; rc=1; }
    end "ctest -L gpu" "$rc"

    if [ $suite = 1 ]; then
        # the rest of the suite: the gpu tests have just run, so the whole suite has run once
        begin "ctest -LE gpu (the rest of the suite)"
        (cd "$BUILD" && ctest -LE gpu --output-on-failure -j "$JOBS")
        end "ctest -LE gpu" $?
    fi
fi

# ---- 4. and 5. compute-sanitizer: memcheck on every gpu test, racecheck on the kernels with
# shared memory, each test's ctest entry (shards included) under tests/gpu/sanitize_run.py
sanitize() { # phase tool budget jobs timeout [runner options]
    local phase=$1 tool=$2 budget=$3 jobs=$4 timeout=$5
    shift 5
    begin "compute-sanitizer --tool $tool ($jobs at a time, budget $budget s)"
    local rc=0 dry=()
    [ $dry_run = 1 ] && dry=(--dry-run)
    if [ $dry_run = 0 ] && ! command -v compute-sanitizer >/dev/null; then
        echo "test-gpu: compute-sanitizer not found (looked in PATH and /usr/local/cuda/bin)"
        end "$phase" 1
        return
    fi
    python3 "$ROOT/tests/gpu/sanitize_run.py" --build "$BUILD" --tool "$tool" --jobs "$jobs" \
        --timeout "$timeout" --budget "$budget" --log-dir "$BUILD/sanitize" "${dry[@]}" "$@" |
        tee "$BUILD/sanitize/$tool-summary.txt"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 2 ]; then
        # gVisor machines refuse compute-sanitizer (KINDS.md); Firecracker ones run it
        echo "==== test-gpu: $tool: not run (compute-sanitizer refuses this machine's device); not counted as a failure"
        rc=0
    fi
    local line
    line=$(grep "^$tool summary:" "$BUILD/sanitize/$tool-summary.txt")
    [ -n "$line" ] && summaries+=("$line")
    end "$phase" "$rc"
}
summaries=()
mkdir -p "$BUILD/sanitize"
if [ $memcheck = 1 ]; then
    # every gpu test; test_cuda_public's op cases every MEMCHECK_STRIDE-th (1: all of them)
    sanitize memcheck memcheck "$MEMCHECK_BUDGET" "$SANITIZE_JOBS" "$MEMCHECK_TIMEOUT" \
        -L gpu -E "$MEMCHECK_EXCLUDE" --env "TGC_GPU_TEST_STRIDE=$MEMCHECK_STRIDE" \
        --env TGC_GPU_TEST_SANITIZER=1
fi
if [ $racecheck = 1 ]; then
    # shared-memory hazards of the GEMM / conv templates, the fused attention, the native
    # reduction kernels (softmax, norms, losses) and the generated reductions of every op
    sanitize racecheck racecheck "$RACECHECK_BUDGET" "$SANITIZE_JOBS" "$RACECHECK_TIMEOUT" \
        -L gpu -R "$RACECHECK_TESTS" --env "TGC_GPU_TEST_STRIDE=$RACECHECK_STRIDE" \
        --env TGC_GPU_TEST_SANITIZER=1
fi

total_s=$(($(date +%s) - t_begin))
echo "==== test-gpu: phases (seconds):"
printf '  %s\n' "${phase_times[@]}"
[ ${#summaries[@]} -gt 0 ] && printf '  %s\n' "${summaries[@]}"
echo "  total ${total_s} s"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cat "$BUILD"/sanitize/*-summary.txt >"$OUT/sanitize_summary.txt" 2>/dev/null
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "test-gpu: FAILED: ${failed[*]}"
    exit 1
fi
echo "test-gpu: all phases passed"
