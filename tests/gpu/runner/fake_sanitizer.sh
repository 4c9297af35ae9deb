#!/usr/bin/env bash
# A stand-in for compute-sanitizer on machines without a GPU (tests/gpu/runner/check_runner.sh):
#   fake_sanitizer.sh --tool memcheck|racecheck [--print-limit N] [--report-api-errors no] CMD...
# runs CMD and then prints the report lines compute-sanitizer prints, as the environment asks:
#   FAKE_API="ERR:FN ERR:FN ..."  one API-error report per word (none with --report-api-errors no)
#   FAKE_MEM=N                    N memory-error reports (memcheck)
#   FAKE_RACE="E W"               E error and W warning hazards (racecheck)
#   FAKE_UNSUPPORTED=1            the refusal of an unsupported device, and no run
# Its exit status is CMD's, as compute-sanitizer's is without --error-exitcode.
set -u
tool="" api=1
while [ $# -gt 0 ]; do
    case $1 in
    --tool) tool=$2; shift 2 ;;
    --print-limit) shift 2 ;;
    --report-api-errors) [ "$2" = no ] && api=0; shift 2 ;;
    --*) echo "fake_sanitizer: unknown option $1" >&2; exit 9 ;;
    *) break ;;
    esac
done
echo "========= COMPUTE-SANITIZER"
if [ "${FAKE_UNSUPPORTED:-0}" = 1 ]; then
    echo "========= Error: Device not supported"
    exit 1
fi
"$@"
rc=$?
n=0
if [ $api = 1 ]; then
    for e in ${FAKE_API:-}; do
        echo "========= Program hit ${e%%:*} (error 2) due to \"fake\" on CUDA API call to ${e#*:}."
        n=$((n + 1))
    done
fi
if [ "$tool" = memcheck ]; then
    for _ in $(seq 1 "${FAKE_MEM:-0}"); do
        echo "========= Invalid __global__ read of size 4 bytes"
        n=$((n + 1))
    done
    echo "========= ERROR SUMMARY: $n error$([ $n = 1 ] || echo s)"
else
    read -r e w <<<"${FAKE_RACE:-0 0}"
    echo "========= RACECHECK SUMMARY: $((e + w)) hazards displayed ($e errors, $w warnings)"
fi
exit $rc
