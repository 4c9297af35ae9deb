#!/usr/bin/env bash
# ctest test_sanitize_runner: the logic of tests/gpu/sanitize_run.py (the parallel
# compute-sanitizer runner of tests/gpu/test_gpu.sh) on a machine without a GPU, with
# fake_sanitizer.sh in place of compute-sanitizer and hand-made ctest entries: what passes
# and fails (expected and unexpected API errors, memory errors, racecheck errors and
# warnings, exit status, skips, timeouts, the phase budget), that tests run at once, the
# order (cost), the environment (shards) and the exit status of an unsupported device.
set -u
here=$(cd "$(dirname "$0")" && pwd)
runner=$here/../sanitize_run.py
fake=$here/fake_sanitizer.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
check() { # description, then a command that must succeed
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fails=$((fails + 1)); fi
}

# entry NAME COST 'SHELL COMMAND' [ENV=VALUE...]: one ctest test in --show-only=json-v1 form
entries=()
entry() {
    local name=$1 cost=$2 cmd=$3 env="" sep=""
    shift 3
    for kv in "$@"; do env+="$sep\"$kv\""; sep=,; done
    entries+=("{\"name\":\"$name\",\"command\":[\"sh\",\"-c\",\"$cmd\"],\"properties\":[
      {\"name\":\"ENVIRONMENT\",\"value\":[$env]},{\"name\":\"LABELS\",\"value\":[\"gpu\"]},
      {\"name\":\"COST\",\"value\":$cost},{\"name\":\"WORKING_DIRECTORY\",\"value\":\"$work\"}]}")
}
write_json() { # file: the entries so far, then none
    local IFS=,
    printf '{"kind":"ctestInfo","version":{"major":1,"minor":0},"tests":[%s]}\n' \
        "${entries[*]}" >"$1"
    entries=()
}
run() { # json tool [options]: the runner's output in $work/out, its status in $status
    local json=$1 tool=$2
    shift 2
    "${PYTHON3:-python3}" "$runner" --build "$work" --tool "$tool" --tests-json "$json" --sanitizer "$fake" \
        --log-dir "$work/logs" "$@" >"$work/out" 2>&1
    status=$?
}
has() { grep -qE "$1" "$work/out" || { echo "  no line matching: $1"; sed 's/^/  | /' "$work/out"; false; }; }

# ---- memcheck: what passes and what fails
entry t_ok 1 'exit 0'
entry t_oom 1 'exit 0' "FAKE_API=CUDA_ERROR_OUT_OF_MEMORY:cuMemAlloc_v2 CUDA_ERROR_OUT_OF_MEMORY:cuMemAlloc_v2"
entry t_api 1 'exit 0' "FAKE_API=CUDA_ERROR_OUT_OF_MEMORY:cuMemAlloc_v2 CUDA_ERROR_INVALID_VALUE:cuMemcpyHtoD_v2"
entry t_tmap 1 'exit 0' "FAKE_API=CUDA_ERROR_INVALID_VALUE:cuTensorMapEncodeTiled"
entry t_comm_probe 1 'exit 0' "FAKE_API=CUDA_ERROR_INVALID_IMAGE:cuFuncGetAttribute"
entry t_mem 1 'exit 0' "FAKE_MEM=1"
entry t_exit 1 'echo broken; exit 3'
entry t_skip 1 'echo tgc: 2 GPU tests skipped: no device; exit 77'
# shellcheck disable=SC2016 # expanded by the test's shell
entry t_shard 1 'test \"$TGC_TEST_SHARD\" = 1/2 && test \"$TGC_GPU_TEST_STRIDE\" = 3' "TGC_TEST_SHARD=1/2"
write_json "$work/mem.json"
run "$work/mem.json" memcheck --env TGC_GPU_TEST_STRIDE=3
check "memcheck: a failure fails the phase" test "$status" = 1
check "memcheck: a clean test passes" has '^memcheck: t_ok: ok, '
check "memcheck: out-of-memory API errors are expected" \
    has '^memcheck: t_oom: ok, .*2 errors, 2 expected.*CUDA_ERROR_OUT_OF_MEMORY@cuMemAlloc_v2 x2'
check "memcheck: another API error fails" \
    has '^memcheck: t_api: FAIL, .*1 unexpected sanitizer errors.*CUDA_ERROR_INVALID_VALUE@cuMemcpyHtoD_v2 x1'
check "memcheck: the tensor-map encoder's refusals are expected" \
    has '^memcheck: t_tmap: ok, .*1 errors, 1 expected'
check "memcheck: the NCCL tests run without API-error reports" has "^memcheck: t_comm_probe: ok, "
check "memcheck: a memory error fails" has '^memcheck: t_mem: FAIL, .*1 unexpected'
check "memcheck: a failing test fails, its output shown" has '^memcheck: t_exit: FAIL, .*: exit status 3'
check "memcheck: ... with the tail of its log" has '^    \| broken'
check "memcheck: skipped GPU cases fail" has '^memcheck: t_skip: FAIL, .*: GPU cases skipped'
check "memcheck: the test's environment and --env reach it" has '^memcheck: t_shard: ok'
check "memcheck: the summary counts" has '^memcheck summary: 5 passed, 4 failed, 0 not run of 9 tests'
check "memcheck: one log per test" test -s "$work/logs/memcheck-t_exit.log"

entry t_skip 1 'echo tgc: 2 GPU tests skipped: no device; exit 77'
write_json "$work/skip.json"
run "$work/skip.json" memcheck --allow-skip
check "--allow-skip: skips pass" test "$status" = 0

# ---- racecheck
entry r_clean 1 'exit 0' "FAKE_RACE=0 0"
entry r_warn 1 'exit 0' "FAKE_RACE=0 2"
entry r_err 1 'exit 0' "FAKE_RACE=1 0"
write_json "$work/race.json"
run "$work/race.json" racecheck
check "racecheck: an error hazard fails" has '^racecheck: r_err: FAIL, .*1 racecheck errors'
check "racecheck: warnings are listed, not failures" has '^racecheck: r_warn: ok.*2 hazards \(0 errors, 2 warnings\)'
check "racecheck: a clean test passes" has '^racecheck: r_clean: ok'
check "racecheck: status 1" test "$status" = 1

# ---- parallel, the order, timeouts and the budget
for i in 1 2 3 4; do entry "p$i" 1 'sleep 2'; done
write_json "$work/par.json"
t0=$(date +%s)
run "$work/par.json" memcheck --jobs 4
check "four tests of 2 s at once take less than 8 s" test $(($(date +%s) - t0)) -lt 7
check "four parallel tests pass" has '^memcheck summary: 4 passed, 0 failed'

entry short 1 'exit 0'
entry long 50 'exit 0'
entry middle 10 'exit 0'
write_json "$work/order.json"
run "$work/order.json" memcheck --dry-run
check "--dry-run: the longest first" \
    test "$(grep -oE '^(short|long|middle):' "$work/out" | tr -d '\n')" = "long:middle:short:"
check "--dry-run: the command is the sanitizer's" has "^long: .*fake_sanitizer.sh --tool memcheck --print-limit 10000 sh -c exit 0"
check "--dry-run: runs nothing" test ! -e "$work/logs/memcheck-long.log"

entry hang 1 'sleep 30'
write_json "$work/hang.json"
t0=$(date +%s)
run "$work/hang.json" memcheck --timeout 1
check "a test past --timeout is killed" test $(($(date +%s) - t0)) -lt 10
check "... and fails as a timeout" has '^memcheck: hang: FAIL, .*: timeout'

entry b1 2 'sleep 3'
entry b2 1 'exit 0'
write_json "$work/budget.json"
run "$work/budget.json" memcheck --jobs 1 --budget 1
check "the budget cuts the running test" has '^memcheck: b1: FAIL, .*: timeout'
check "... and starts no other" has '^memcheck: b2: not run \(budget'
check "... which fails the phase" has '^memcheck summary: 0 passed, 1 failed, 1 not run of 2 tests'

entry u 1 'exit 0' "FAKE_UNSUPPORTED=1"
write_json "$work/unsup.json"
run "$work/unsup.json" memcheck
check "an unsupported device: status 2" test "$status" = 2

if [ $fails -gt 0 ]; then
    echo "check_runner: $fails checks FAILED"
    exit 1
fi
echo "check_runner: all checks passed"
