#!/usr/bin/env python3
"""PyTorch CPU reference for tests/bench/bench_models.c: the same three inference workloads,
eager and torch.compile (default mode), in eval mode under torch.no_grad().

  resnet18_b64       torchvision resnet18(num_classes=10), 64 x 3 x 32 x 32
  bert_base_b8_s128  a BERT-base encoder written like examples/models/bert.h (Hugging Face
                     BertModel layout without the pooler; attention = matmul, scale, additive
                     padding mask, softmax, matmul), batch 8, seq 128
  seed_cnn_b64       the seed's CNN, 64 x 3 x 32 x 32

For each: the median of --iters timed calls after --warmup, eager and compiled, and the
wall time of torch.compile's first call (compile + run). Writes --json for compare_models.sh.

Training (--train, or --only seed_cnn_train,resnet18_train), the workloads of
tests/bench/bench_train.c: the seed CNN and torchvision's ResNet18, batch 64, 3 x 32 x 32,
train mode, Adam(lr=1e-3), one step = zero_grad, forward, cross_entropy, backward, step:
  seed_cnn_train_b64 / resnet18_train_b64
    eager_ms           plain PyTorch
    compiled_ms        torch.compile(model) (default mode), the loss, backward and Adam
                       eager around it (what the seed's user wrote)
    step_compiled_ms   torch.compile of the whole step function (forward, loss, backward and
                       optimizer.step traced by dynamo)
    compile_first_call_ms / step_compile_first_call_ms   the first call of each (compile + run)
bench_train --torch-ref torch.json then prints libtgc's ratios against the best of these.

  .venv-bench/bin/python tests/bench/torch_cpu_ref.py --threads 2 --json torch.json
  .venv-bench/bin/python tests/bench/torch_cpu_ref.py --threads 2 --train --only none \
      --json torch_train.json

Benchmark-only: torch is never a test dependency of libtgc.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

# torch.compile's first call is measured cold: a fresh inductor cache (unless --warm-cache),
# set before torch is imported.
if "--warm-cache" not in sys.argv:
    import atexit
    import shutil

    _cold_cache = tempfile.mkdtemp(prefix="torchinductor_cold_")
    atexit.register(shutil.rmtree, _cold_cache, ignore_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cold_cache
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"

import torch
from torch import nn
import torch.nn.functional as F


# ---- models ----

class SeedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.sequential = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=2), nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(32, 64, kernel_size=3, padding=2), nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 128, kernel_size=3, padding=2), nn.ReLU(),
            nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(128 * 8 * 8, 10))

    def forward(self, x):
        return self.sequential(x)


class BasicBlock(nn.Module):
    """torchvision's BasicBlock, for when torchvision is not installed."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for i, w in enumerate([64, 128, 256, 512]):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, w, stride), BasicBlock(w, w, 1)))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18():
    try:
        import torchvision
        return torchvision.models.resnet18(num_classes=10), "torchvision"
    except Exception:  # torchvision missing or broken: the same layout, written here
        return ResNet18(10), "local"


class BertLayer(nn.Module):
    def __init__(self, h, heads, inter, eps):
        super().__init__()
        self.heads, self.d = heads, h // heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_out, self.attn_ln = nn.Linear(h, h), nn.LayerNorm(h, eps=eps)
        self.inter, self.out = nn.Linear(h, inter), nn.Linear(inter, h)
        self.out_ln = nn.LayerNorm(h, eps=eps)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.d).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d)) + ext_mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, s, _ = ctx.shape
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, -1)
        x = self.attn_ln(self.attn_out(ctx) + x)
        return self.out_ln(self.out(F.gelu(self.inter(x))) + x)


class Bert(nn.Module):
    def __init__(self, hidden=768, layers=12, heads=12, inter=3072, vocab=30522, max_pos=512,
                 type_vocab=2, eps=1e-12):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(type_vocab, hidden)
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, inter, eps) for _ in range(layers))

    def forward(self, ids, types, mask, pos):
        x = self.ln(self.word(ids) + self.pos(pos) + self.token_type(types))
        ext = ((mask.float() - 1.0) * 10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, ext)
        return x


def bert_inputs(batch, seq, vocab=30522, pad=16):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    types = (torch.arange(seq) >= seq // 2).long().expand(batch, seq).contiguous()
    mask = torch.ones(batch, seq)
    mask[1::2, seq - pad:] = 0
    pos = torch.arange(seq)[None, :]
    return ids, types, mask, pos


# ---- timing ----

def median_ms(fn, args, warmup, iters, budget):
    start = time.perf_counter()
    for _ in range(warmup):
        if time.perf_counter() - start >= budget:
            break
        fn(*args)
    times, start = [], time.perf_counter()
    while len(times) < iters and (not times or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times), len(times)


def bench(name, model, args, opt, out):
    model.eval()
    with torch.no_grad():
        eager_ms, eager_n = median_ms(model, args, opt.warmup, opt.iters, opt.budget)
        line = f"{name:<18} torch eager {eager_ms:8.1f} ms"
        res = {"eager_ms": eager_ms, "eager_iters": eager_n}
        if not opt.no_compile:
            torch._dynamo.reset()
            compiled = torch.compile(model)
            t0 = time.perf_counter()
            compiled(*args)
            first_ms = 1e3 * (time.perf_counter() - t0)
            comp_ms, comp_n = median_ms(compiled, args, opt.warmup, opt.iters, opt.budget)
            res.update(compiled_ms=comp_ms, compiled_iters=comp_n, compile_first_call_ms=first_ms)
            line += (f"  torch.compile {comp_ms:8.1f} ms  eager/compiled {eager_ms / comp_ms:5.2f}x"
                     f"  first call {first_ms / 1e3:.1f} s")
        print(line, flush=True)
        out[name] = res


def bench_train(name, make_model, opt, out):
    """Training steps: eager, torch.compile(model), torch.compile(whole step)."""
    torch.manual_seed(0)
    xs = [torch.randn(64, 3, 32, 32) for _ in range(4)]
    ys = [torch.randint(0, 10, (64,)) for _ in range(4)]

    def make_step(model, fwd, compile_step):
        optim = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(x, y):
            optim.zero_grad(set_to_none=True)
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            optim.step()
            return loss

        return torch.compile(step) if compile_step else step

    def timed(step):
        i = [0]

        def call():
            k = i[0] % 4
            i[0] += 1
            return step(xs[k], ys[k])

        t0 = time.perf_counter()
        call()
        first_ms = 1e3 * (time.perf_counter() - t0)
        ms, n = median_ms(call, (), opt.warmup, opt.iters, opt.budget)
        return ms, n, first_ms

    res = {}
    model = make_model().train()
    eager_ms, eager_n, _ = timed(make_step(model, model, False))
    res.update(eager_ms=eager_ms, eager_iters=eager_n)
    line = f"{name:<20} torch eager {eager_ms:8.1f} ms"
    if not opt.no_compile:
        torch._dynamo.reset()
        model = make_model().train()
        comp_ms, comp_n, first = timed(make_step(model, torch.compile(model), False))
        res.update(compiled_ms=comp_ms, compiled_iters=comp_n, compile_first_call_ms=first)
        torch._dynamo.reset()
        model = make_model().train()
        step_ms, step_n, step_first = timed(make_step(model, model, True))
        res.update(step_compiled_ms=step_ms, step_compiled_iters=step_n,
                   step_compile_first_call_ms=step_first)
        line += (f"  torch.compile(model) {comp_ms:8.1f} ms (first call {first / 1e3:.1f} s)"
                 f"  torch.compile(step) {step_ms:8.1f} ms (first call {step_first / 1e3:.1f} s)")
    print(line, flush=True)
    out[name] = res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--budget", type=float, default=10.0, help="seconds per measurement")
    p.add_argument("--only", default="resnet18,bert,seed_cnn")
    p.add_argument("--bert-layers", type=int, default=12)
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--freezing", action="store_true",
                   help="torch._inductor.config.freezing = True (inference weight folding; "
                        "not torch.compile's default)")
    p.add_argument("--warm-cache", action="store_true",
                   help="let torch.compile reuse its on-disk caches (first call not cold)")
    p.add_argument("--train", action="store_true",
                   help="also the training steps (seed_cnn_train, resnet18_train)")
    p.add_argument("--json")
    opt = p.parse_args()

    torch.set_num_threads(opt.threads)
    if opt.freezing:
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
    torch.manual_seed(0)
    only = set(opt.only.split(","))
    if opt.train:
        only |= {"seed_cnn_train", "resnet18_train"}
    print(f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads, inference no_grad "
          f"+ eval, training train mode + Adam; "
          f"median of up to {opt.iters} after {opt.warmup} warmup", flush=True)
    results, info = {}, {}
    if "resnet18" in only:
        model, src = resnet18()
        info["resnet18_source"] = src
        bench("resnet18_b64", model, (torch.randn(64, 3, 32, 32),), opt, results)
    if "bert" in only:
        name = "bert_base_b8_s128" if opt.bert_layers == 12 else \
            f"bert_base_l{opt.bert_layers}_b8_s128"
        bench(name, Bert(layers=opt.bert_layers), bert_inputs(8, 128), opt, results)
    if "seed_cnn" in only:
        bench("seed_cnn_b64", SeedCNN(), (torch.randn(64, 3, 32, 32),), opt, results)
    if "seed_cnn_train" in only:
        bench_train("seed_cnn_train_b64", SeedCNN, opt, results)
    if "resnet18_train" in only:
        def make_resnet():
            model, src = resnet18()
            info["resnet18_source"] = src
            return model
        bench_train("resnet18_train_b64", make_resnet, opt, results)
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump({"tool": "torch", "version": torch.__version__, "threads": opt.threads,
                       "compile_cache": "warm" if opt.warm_cache else "cold",
                       "freezing": opt.freezing,
                       "results": results, **info}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
