"""Runs the inference parts of the shared PyTorch reference script torch_ref.py (it is not
copied: this file executes it and calls its own functions), so that one device command has
time for them next to libtgc's benchmarks.

    python3 tests/gpu/torch_infer.py PATH/TO/torch_ref.py OUTDIR [--parts cnn,resnet,bert]
                                     [--bert-static]

torch_ref.py runs its "info" part when executed with that argument (cheap: it prints the
dynamo configuration), which also defines infer_bench and bert_bench; this script then calls
  infer_bench(name, mode, "cuda") for name in cnn, resnet and mode in eager, default,
      reduce-overhead (batch 64, 3x32x32, as torch_ref.py's cnn and resnet parts do after
      their training benches);
  bert_bench over torch_ref.py's 15 lengths 32..512, eager and torch.compile default with
      dynamic=None (and dynamic=False with --bert-static: about 60 s more).
Output: the script's own JSON lines on stdout (one per measurement)."""
import os
import sys
import time

ref, outdir = sys.argv[1], sys.argv[2]
parts = ["cnn", "resnet", "bert"]
bert_static = "--bert-static" in sys.argv
if "--parts" in sys.argv:
    parts = sys.argv[sys.argv.index("--parts") + 1].split(",")
os.makedirs(outdir, exist_ok=True)
sys.argv = [ref, "info", outdir]
ns = {"__name__": "torch_ref", "__file__": ref}
exec(compile(open(ref).read(), ref, "exec"), ns)
t0 = time.time()
for name in [p for p in ("cnn", "resnet") if p in parts]:
    for mode in ["eager", "default", "reduce-overhead"]:
        ns["infer_bench"](name, mode, "cuda")
if "bert" in parts:
    lens = [32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512]
    ns["bert_bench"]("eager", "cuda", lens)
    ns["bert_bench"]("default", "cuda", lens, dynamic=None)
    if bert_static:
        ns["bert_bench"]("default", "cuda", lens, dynamic=False)
print('{"torch_infer_total_s": %.1f}' % (time.time() - t0), flush=True)
