"""Runs the training parts of the shared PyTorch reference script torch_ref.py (it is not
copied: this file executes it and calls its own train_bench), so that one device command has
time for them next to libtgc's training benchmark.

    python3 tests/gpu/torch_train.py PATH/TO/torch_ref.py OUTDIR [--parts cnn,resnet]
                                     [--modes eager,default,reduce-overhead]

torch_ref.py runs its cheap "info" part when executed with that argument, which also defines
train_bench; this script then calls train_bench(name, mode, "cuda") (batch 64, 3x32x32, Adam,
as torch_ref.py's cnn and resnet parts do) for each part and mode. Output: the script's own
JSON lines on stdout (one per measurement), which tests/bench/bench_train.c's --torch-ref
reads."""
import os
import sys
import time

ref, outdir = sys.argv[1], sys.argv[2]
parts = ["cnn", "resnet"]
modes = ["eager", "default", "reduce-overhead"]
if "--parts" in sys.argv:
    parts = sys.argv[sys.argv.index("--parts") + 1].split(",")
if "--modes" in sys.argv:
    modes = sys.argv[sys.argv.index("--modes") + 1].split(",")
os.makedirs(outdir, exist_ok=True)
sys.argv = [ref, "info", outdir]
ns = {"__name__": "torch_ref", "__file__": ref}
exec(compile(open(ref).read(), ref, "exec"), ns)
t0 = time.time()
for name in parts:
    for mode in modes:
        ns["train_bench"](name, mode, "cuda")
print('{"torch_train_total_s": %.1f}' % (time.time() - t0), flush=True)
