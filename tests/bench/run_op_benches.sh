#!/usr/bin/env bash
# Builds (when needed) and runs the operator benchmarks: bench_sgemm (vs OpenBLAS),
# bench_conv (vs oneDNN) and bench_pointwise (vs memcpy and a hand-fused C loop), each at 1 and
# 2 threads, printing everything. Never part of the tests or CI.
#
#   tests/bench/run_op_benches.sh [--deps] [--quick] [other flags, passed to every bench]
#     --deps   first install the reference libraries (tests/bench/deps.sh)
#     --quick  small sizes and few runs (all three benches understand it)
#   BUILD=dir  build directory (default build-bench, a Release build)
#   TGC_BACKEND=llvm|interp|...  which backend tgc_config_default picks (default auto)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-bench}
args=()
for a in "$@"; do
  if [ "$a" = "--deps" ]; then
    "$root/tests/bench/deps.sh"
  else
    args+=("$a")
  fi
done

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if ! cmake --build "$build" -j "$(nproc)" --target bench_sgemm bench_conv bench_pointwise \
     >"$build/op_benches_build.log" 2>&1; then
  grep -E "error|Error" "$build/op_benches_build.log" | head -20
  echo "== build failed (full log: $build/op_benches_build.log)"
  exit 1
fi

echo "== $(date -u +%Y-%m-%dT%H:%MZ)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
     "$(nproc) cpus, load average $(cut -d' ' -f1-3 /proc/loadavg), TGC_BACKEND=${TGC_BACKEND:-<unset>}"
status=0
for b in bench_sgemm bench_conv bench_pointwise; do
  echo "== $b --threads 1,2 ${args[*]:-}"
  "$build/tests/bench/$b" --threads 1,2 "${args[@]}" || { echo "== $b exited with $?"; status=1; }
done
exit $status
