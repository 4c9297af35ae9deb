#!/usr/bin/env bash
# `make test-gpu` and `make test-gpu-memcheck`: build and test libtgc on a GPU machine (the H200
# of the device tool: Ubuntu 24.04, CUDA 13.0, no cmocka, no apt, no network, no LLVM dev files).
#
#   tests/gpu/test_gpu.sh [--memcheck-only] [--no-memcheck] [--gpu-only] [--build-only]
#
# --gpu-only skips the whole suite (only `ctest -L gpu`); --build-only stops after the build.
#
# 1. cmocka: when pkg-config finds it, nothing is done; else the .debs in .deps/cmocka/ (made on
#    the development machine by `make gpu-deps`: apt-get download libcmocka0 libcmocka-dev)
#    are unpacked with dpkg -x into /tmp/cm, cmocka.pc's prefix is pointed there, and
#    PKG_CONFIG_PATH, CPATH, LIBRARY_PATH and LD_LIBRARY_PATH are exported.
# 2. configures $GPU_BUILD (build-gpu) with -DTGC_WITH_LLVM=OFF -DTGC_WITH_CUDA=ON
#    -DTGC_WERROR=ON and builds it on every core;
# 3. `ctest -L gpu --output-on-failure`, then the rest of the suite (`ctest -LE gpu`: the gpu
#    tests are not run twice);
# 4. every `gpu`-labelled test once more under `compute-sanitizer --tool memcheck
#    --error-exitcode 1` (slow: kernels run 10-100x slower under memcheck; budget
#    MEMCHECK_TIMEOUT seconds per test, 300 by default; test_cuda_public runs every
#    MEMCHECK_STRIDE-th op case there, 3 by default, through TGC_GPU_TEST_STRIDE).
# A GPU test that skips (no usable GPU: "tgc: N GPU tests skipped: ...") fails this script.
# Every phase prints its elapsed seconds; the script runs them all and exits nonzero when
# one failed. Nothing here needs the network.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${GPU_BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
MEMCHECK_TIMEOUT=${MEMCHECK_TIMEOUT:-300}
MEMCHECK_STRIDE=${MEMCHECK_STRIDE:-3}
memcheck=1 tests=1 suite=1
for a in "$@"; do
    case $a in
    --memcheck-only) tests=0 ;;
    --no-memcheck) memcheck=0 ;;
    --gpu-only) suite=0 ;;
    --build-only) tests=0 memcheck=0 ;;
    *) echo "test_gpu.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
export PATH=$PATH:/usr/local/cuda/bin
failed=()
phase_start=0
begin() { phase_start=$(date +%s%N); echo "==== test-gpu: $1"; }
end() { # name rc
    local ms=$((($(date +%s%N) - phase_start) / 1000000))
    printf '==== test-gpu: %s: rc %s, %d.%01d s\n' "$1" "$2" $((ms / 1000)) $((ms % 1000 / 100))
    [ "$2" = 0 ] || failed+=("$1")
}

# ---- 1. cmocka
if pkg-config --exists cmocka 2>/dev/null; then
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
    export PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export CPATH=$CM/usr/include${CPATH:+:$CPATH}
    export LIBRARY_PATH=$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "cmocka: $(pkg-config --modversion cmocka) unpacked into $CM ($libdir)"
fi

# ---- 2. configure and build
if true; then # always: an incremental build is quick
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
    end build $rc
    [ $rc = 0 ] || echo "test-gpu: the build FAILED for some targets (above); testing what built"
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
    end "ctest -L gpu" $rc

    if [ $suite = 1 ]; then
        # the rest of the suite: the gpu tests have just run, so the whole suite has run once
        begin "ctest -LE gpu (the rest of the suite)"
        (cd "$BUILD" && ctest -LE gpu --output-on-failure -j "$JOBS")
        end "ctest -LE gpu" $?
    fi
fi

# ---- 4. memcheck
if [ $memcheck = 1 ]; then
    begin "compute-sanitizer --tool memcheck on the gpu tests"
    rc=0
    if ! command -v compute-sanitizer >/dev/null; then
        echo "test-gpu: compute-sanitizer not found (looked in PATH and /usr/local/cuda/bin)"
        rc=1
    fi
    names=$(cd "$BUILD" && ctest -L gpu -N | sed -n 's/^ *Test *#[0-9]*: *\([^ ]*\).*/\1/p')
    [ $rc = 0 ] || names=""
    for n in $names; do
        exe=$(find "$BUILD/tests" -maxdepth 2 -type f -name "$n" -perm -u+x | head -n1)
        [ -n "$exe" ] || { echo "memcheck: $n: no executable (not a cmocka test), skipped"; continue; }
        t0=$(date +%s)
        # NCCL (the process-group tests) probes its kernels for other architectures with
        # cudaFuncGetAttributes, and memcheck counts each "no kernel image" answer as an
        # error; those are NCCL's own API calls: memory errors are still reported
        api=()
        case $n in *comm*|*ddp*) api=(--report-api-errors no) ;; esac
        TGC_LOG= CMOCKA_MESSAGE_OUTPUT=stdout TGC_GPU_TEST_STRIDE=$MEMCHECK_STRIDE \
            timeout "$MEMCHECK_TIMEOUT" \
            compute-sanitizer --tool memcheck "${api[@]}" --error-exitcode 1 --print-limit 20 "$exe" \
            >"$BUILD/memcheck-$n.log" 2>&1
        r=$?
        echo "memcheck: $n: rc $r, $(($(date +%s) - t0)) s ($(grep -c 'Invalid\|ERROR SUMMARY' "$BUILD/memcheck-$n.log") report lines)"
        grep -E "ERROR SUMMARY|tgc: .*skipped|FAILED|Invalid" "$BUILD/memcheck-$n.log" | head -n 20
        if grep -q "Device not supported\|not supported on this" "$BUILD/memcheck-$n.log"; then
            # gVisor machines refuse compute-sanitizer (KINDS.md); Firecracker ones run it
            echo "memcheck: UNAVAILABLE: compute-sanitizer refuses this machine's device"
            tail -n 5 "$BUILD/memcheck-$n.log"
            rc=2
            break
        fi
        if [ $r != 0 ]; then
            rc=1
            [ $r = 124 ] && echo "memcheck: $n: timed out after $MEMCHECK_TIMEOUT s"
            tail -n 30 "$BUILD/memcheck-$n.log"
        fi
    done
    if [ $rc = 2 ]; then
        echo "==== test-gpu: memcheck: not run (compute-sanitizer unavailable here); not counted as a failure"
        rc=0
    fi
    end memcheck $rc
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "test-gpu: FAILED: ${failed[*]}"
    exit 1
fi
echo "test-gpu: all phases passed"
