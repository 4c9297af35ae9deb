"""Joins one device run's measurements into a table of ratios (tests/gpu/device_run.sh).

    python3 tests/gpu/summarize.py BENCH_JSONL TORCH_GRAPH_LOG TORCH_REF_LOG [PHASES_FILE]

BENCH_JSONL: bench_gpu --json output (one object a line). The two logs: the stdout of
torch_graph_ref.py and of torch_infer.py (torch_ref.py's functions): their JSON lines are
read, other lines ignored. PHASES_FILE: lines "phase seconds status". Writes the table (markdown)
to stdout. Every libtgc figure is compared with PyTorch's from the same run, each precision
with the same precision: HIGHEST with PyTorch's fp32 (allow_tf32 off; note that
torch_ref.py's convolutions run with cuDNN's default, which allows TF32), HIGH with TF32
(torch_graph_ref.py's best of TF32 and TF32 + channels-last; its bf16-autocast runs are not
a TF32 figure and are left out), MEDIUM against the TF32 figure
(no bf16 model reference is measured) and bf16 GEMM against torch.matmul on bf16. A ratio
> 1 means libtgc is faster; each target is marked met or MISSED, never hidden."""
import json
import sys


def jsonl(path):
    out = []
    try:
        for line in open(path, errors="replace"):
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


bench = jsonl(sys.argv[1])
graph = jsonl(sys.argv[2])
tref = jsonl(sys.argv[3])
phases = []
if len(sys.argv) > 4:
    try:
        phases = [l.split() for l in open(sys.argv[4]) if l.strip()]
    except OSError:
        pass


def find(rows, **kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def fmt(v, unit=""):
    return "—" if v is None else (f"{v:.3f}{unit}" if v < 10 else f"{v:.1f}{unit}")


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


lines = []
P = lines.append
dev = find(bench, bench="device")
P(f"# libtgc on the GPU vs PyTorch, one device run ({dev['name'] if dev else 'device ?'})")
P("")
if phases:
    P("| phase | seconds | status |")
    P("|---|---|---|")
    for p in phases:
        P(f"| {p[0]} | {p[1] if len(p) > 1 else '?'} | {' '.join(p[2:]) if len(p) > 2 else ''} |")
    P("")

targets = []


def target(name, ok, text):
    targets.append((name, ok, text))


# ---- models
P("## Inference, batch 64 x 3x32x32 (BERT-base: batch 8, seq 128): ms per call")
P("")
P("| workload | precision | tgc DEFAULT | tgc REDUCE_OVERHEAD | torch eager | torch.compile | "
  "torch reduce-overhead | torch CUDA graph (best) | torch best / tgc best | torch.compile / tgc DEFAULT |")
P("|---|---|---|---|---|---|---|---|---|---|")
tr_name = {"seed_cnn_infer_b64": "cnn_infer_bs64", "resnet18_infer_b64": "resnet_infer_bs64"}
gr_name = {"seed_cnn_infer_b64": "cnn_infer_bs64", "resnet18_infer_b64": "resnet_infer_bs64"}
for wl in ["seed_cnn_infer_b64", "resnet18_infer_b64", "bert_base_b8_s128"]:
    for prec in ["highest", "high", "medium"]:
        d = find(bench, bench="model", workload=wl, mode="default", precision=prec)
        r = find(bench, bench="model", workload=wl, mode="reduce-overhead", precision=prec)
        d_ms, r_ms = d and d["ms"], r and r["ms"]
        tgc_best = min([x for x in (d_ms, r_ms) if x is not None], default=None)
        te = tc = tro = tg = None
        if wl in tr_name and prec == "highest":
            e = find(tref, workload=tr_name[wl], mode="eager")
            c = find(tref, workload=tr_name[wl], mode="default")
            o = find(tref, workload=tr_name[wl], mode="reduce-overhead")
            te, tc, tro = e and e["ms_median"], c and c["ms_median"], o and o["ms_median"]
        if wl in gr_name:
            tf32 = prec != "highest"
            cands = [g["cudagraph_ms"] for g in graph
                     if g.get("workload") == gr_name[wl] and g.get("tf32") == tf32
                     and not g.get("amp") and "cudagraph_ms" in g]
            tg = min(cands) if cands else None
        else:
            g = find(graph, workload="bert_base_infer_bs8_L128", tf32=prec != "highest", amp=None)
            te, tg = (g and g["eager_ms"]), (g and g["cudagraph_ms"])
        torch_best = min([x for x in (te, tc, tro, tg) if x is not None], default=None)
        rb, rc = ratio(torch_best, tgc_best), ratio(tc, d_ms)
        P(f"| {wl} | {prec}{' (vs tf32)' if prec == 'medium' else ''} | {fmt(d_ms)} | {fmt(r_ms)} | "
          f"{fmt(te)} | {fmt(tc)} | {fmt(tro)} | {fmt(tg)} | {fmt(rb, 'x')} | {fmt(rc, 'x')} |")
        if prec in ("highest", "high") and rb is not None:
            target(f"{wl} {prec}: best mode >= 1.5x faster than PyTorch's best", rb >= 1.5,
                   f"{rb:.2f}x")
        if prec == "highest" and rc is not None:
            target(f"{wl}: DEFAULT faster than torch.compile default", rc > 1.0, f"{rc:.2f}x")
P("")

# ---- GEMM
P("## GEMM 4096^3: TFLOP/s")
P("")
P("| inputs / precision | tgc | torch.matmul (cuBLAS) | tgc / cuBLAS | target |")
P("|---|---|---|---|---|")
for prec, tdt, tf32, want in [("highest", "torch.float32", False, 0.8), ("high", "torch.float32", True, 0.7),
                              ("medium", "torch.bfloat16", None, 0.7), ("bf16", "torch.bfloat16", None, 0.7)]:
    b = find(bench, bench="gemm", precision=prec)
    g = find(graph, workload="gemm_4096", dtype=tdt, **({} if tf32 is None else {"tf32": tf32}))
    t, c = b and b["tflops"], g and g["tflops"]
    rr = ratio(t, c)
    P(f"| {prec if prec != 'bf16' else 'bf16 inputs'} | {fmt(t)} | {fmt(c)} | {fmt(rr, 'x')} | >= {want}x |")
    if rr is not None:
        target(f"GEMM 4096^3 {prec} >= {want}x cuBLAS", rr >= want, f"{rr:.2f}x")
P("")

# ---- the rest
P("## Bandwidth, compile time, eager, overhead")
P("")
P("| measurement | tgc | reference (same run) | ratio | target |")
P("|---|---|---|---|---|")
pw = find(bench, bench="pointwise")
if pw:
    P(f"| 8 pointwise ops, 256 MiB f32 (GB/s, 1 read + 1 write) | {pw['gbps']:.0f} ({pw['kernels']} kernels) | "
      f"device copy {pw['copy_gbps']:.0f} | {pw['ratio_to_copy']:.2f} | >= 0.85 |")
    target("8 pointwise ops >= 85% of device copy bandwidth", pw["ratio_to_copy"] >= 0.85,
           f"{pw['ratio_to_copy']:.2f}")
cc = find(bench, bench="cold_compile")
tcomp = find(tref, workload="resnet_infer_bs64", mode="default")
if cc:
    ref_s = tcomp and tcomp["warmup_s"]
    P(f"| cold compile ResNet18 inference (s) | {cc['compile_ms'] / 1e3:.3f} | torch.compile first 5 calls "
      f"{fmt(ref_s)} | {fmt(ratio(ref_s, cc['compile_ms'] / 1e3), 'x')} | < 1 s |")
    target("cold compile of ResNet18 inference < 1 s", cc["compile_ms"] < 1000, f"{cc['compile_ms']:.0f} ms")
sw = find(bench, bench="sweep")
tsw = find(tref, mode="default", dynamic=None, workload="bert_L12_H768_bs8_varlen")
tse = find(tref, mode="eager", workload="bert_L12_H768_bs8_varlen")
if sw:
    ref_s = tsw and tsw["total_s"]
    P(f"| BERT-base sweep, 15 lengths, dynamic AUTO (s, compiles) | {sw['total_s']:.2f} s, {sw['compiles']} compiles | "
      f"torch.compile {fmt(ref_s)} s; eager {fmt(tse and tse['total_s'])} s | {fmt(ratio(ref_s, sw['total_s']), 'x')} | "
      f"<= 2 compiles, < 3 s |")
    target("BERT sweep: at most 2 compiles and under 3 s", sw["compiles"] <= 2 and sw["total_s"] < 3,
           f"{sw['compiles']} compiles, {sw['total_s']:.2f} s")
ea = find(bench, bench="eager")
tea = find(tref, workload="resnet_infer_bs64", mode="eager")
if ea:
    te = tea and tea["ms_median"]
    rr = ratio(ea["ms"], te)
    P(f"| eager ResNet18 inference (ms) | {ea['ms']:.3f} | torch eager {fmt(te)} | tgc/torch {fmt(rr, 'x')} | <= 1.3x |")
    if rr is not None:
        target("eager GPU ResNet18 within 1.3x of PyTorch eager", rr <= 1.3, f"{rr:.2f}x")
for mode in ["reduce-overhead", "default"]:
    ov = find(bench, bench="overhead", mode=mode)
    if ov:
        P(f"| cache hit host time, tiny model, {mode} (us per tgc_call) | {ov['host_us']:.2f} "
          f"(synchronized each: {ov['synced_us']:.2f}) | guards {ov['guard_ns']:.0f} ns | | "
          f"{'< 5 us' if mode == 'reduce-overhead' else ''} |")
        if mode == "reduce-overhead":
            target("REDUCE_OVERHEAD cache hit under 5 us on the host", ov["host_us"] < 5, f"{ov['host_us']:.2f} us")
P("")
P("## Targets")
P("")
for name, ok, text in targets:
    P(f"- {'met   ' if ok else 'MISSED'} {name}: {text}")
if not targets:
    P("- no measurement to check (see the logs)")
print("\n".join(lines))
