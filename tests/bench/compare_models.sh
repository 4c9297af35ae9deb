#!/bin/sh
# libtgc vs PyTorch on the CPU, whole models, in one run with one thread count:
#   bench_models (libtgc compiled and eager) and torch_cpu_ref.py (torch eager and
#   torch.compile), then a table of the figures and their ratios.
#
#   tests/bench/compare_models.sh [THREADS] [-- extra args for both, e.g. --only resnet18]
#
# Environment: BUILD (default build) names the CMake build folder holding
# tests/bench/bench_models; PYTHON (default .venv-bench/bin/python, else python3) must have
# torch (pip install torch; torchvision is optional). Without torch, only libtgc is shown.
# Run from the repository root. Benchmark-only: torch is never a test dependency.
set -eu

THREADS=${1:-2}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
BUILD=${BUILD:-build}
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv-bench/bin/python ]; then PYTHON=.venv-bench/bin/python; else PYTHON=python3; fi
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

BENCH=$BUILD/tests/bench/bench_models
if [ ! -x "$BENCH" ]; then
    echo "compare_models.sh: $BENCH not found; build first (make all or cmake --build $BUILD)" >&2
    exit 1
fi

echo "== libtgc ($BENCH, $THREADS threads)"
"$BENCH" --threads "$THREADS" --json "$OUT/tgc.json" "$@"

echo
if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "== PyTorch ($PYTHON tests/bench/torch_cpu_ref.py, $THREADS threads)"
    "$PYTHON" tests/bench/torch_cpu_ref.py --threads "$THREADS" --json "$OUT/torch.json" "$@"
else
    echo "== PyTorch: not available to $PYTHON (pip install torch into .venv-bench); libtgc only"
fi

echo
python3 - "$OUT/tgc.json" "$OUT/torch.json" <<'EOF'
import json, os, sys

tgc = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else {"results": {}}
tr = torch["results"]


def fmt(v, unit=" ms"):
    return "-" if v is None else f"{v:.1f}{unit}"


def ratio(a, b):
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"


print(f"libtgc backend {tgc['backend']}, {tgc['threads']} threads; torch "
      f"{torch.get('version', 'n/a')}. Ratios > 1 mean libtgc compiled is faster.")
head = (f"{'workload':<20}{'tgc compiled':>14}{'tgc eager':>12}{'torch eager':>13}"
        f"{'torch.compile':>15}{'t.eager/tgc':>13}{'t.compile/tgc':>15}")
print(head)
print("-" * len(head))
for name, r in tgc["results"].items():
    t = tr.get(name, {})
    c = r["compiled_ms"]
    print(f"{name:<20}{fmt(c):>14}{fmt(r['eager_ms']):>12}{fmt(t.get('eager_ms')):>13}"
          f"{fmt(t.get('compiled_ms')):>15}{ratio(t.get('eager_ms'), c):>13}"
          f"{ratio(t.get('compiled_ms'), c):>15}")
cold = tgc.get("resnet18_b64_cold")
if cold:
    tfirst = tr.get("resnet18_b64", {}).get("compile_first_call_ms")
    print(f"\ncold compile, resnet18_b64: libtgc {cold['compile_ms']:.1f} ms "
          f"(first call {cold['first_call_ms']:.1f} ms); torch.compile first call "
          f"{fmt(tfirst)}")
EOF
