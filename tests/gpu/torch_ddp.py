"""PyTorch DistributedDataParallel reference for tests/bench/bench_ddp.c: the training step of
ResNet18 (torchvision's resnet18(num_classes=10), as the torch_ref.py reference script uses; a
definition of the same layout below when torchvision is missing) and of the seed CNN, at
batch 64 PER GPU, 3x32x32, Adam (lr 1e-3), cross entropy, one process per GPU over NCCL.

    python3 -m torch.distributed.run --standalone --nproc_per_node N tests/gpu/torch_ddp.py \
        [--models resnet18,cnn] [--modes eager,compile] [--precision highest,high] \
        [--batch 64] [--iters 30] [--warmup 5]

(torchrun ... works the same.) Works with N = 1 (a world of one, still through NCCL and
DDP's reducer). NCCL_NVLS_ENABLE=0 is set unless it is set already (NVLink multicast can take
a shared host's GPUs out of service), before NCCL starts.

Modes: eager (DDP(model)) and compile (torch.compile of the DDP module, default mode: the
DDP optimizer splits the graph at bucket boundaries so the all-reduces overlap backward);
reduce-overhead may be asked for too (torch.compile mode="reduce-overhead"). Precisions:
highest = fp32 (TF32 off for matmuls AND cuDNN convolutions; PyTorch's default leaves cuDNN's
TF32 on), high = TF32 on for both. Timing: --warmup steps (the first compiles), a barrier,
then --iters steps with a CUDA event pair around each (the step time's median) and
torch.cuda.synchronize around the loop (images/s = iters * batch / wall time).

Output, one JSON object per line (bench_ddp.c parses the "total" lines):
  {"torch_ddp": "rank", "model": "resnet18", "mode": "eager", "tf32": false, "world": 2,
   "rank": 0, "batch_per_rank": 64, "step_ms_median": 4.9, "images_per_s": 13000.0, ...}
  {"torch_ddp": "total", ..., "images_per_s": 26000.0}   (rank 0: the sum over the ranks)"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


class SeedCNN(nn.Module):
    """The seed's CNN (torch_ref.py's SeedCNN)."""

    def __init__(self):
        super().__init__()
        self.sequential = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=2), nn.ReLU(), nn.MaxPool2d(stride=2, kernel_size=3),
            nn.Conv2d(32, 64, 3, padding=2), nn.ReLU(), nn.MaxPool2d(stride=2, kernel_size=3),
            nn.Conv2d(64, 128, 3, padding=2), nn.ReLU(), nn.AdaptiveAvgPool2d(8), nn.Flatten(),
            nn.Linear(128 * 8 * 8, 10))

    def forward(self, x):
        return self.sequential(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class ResNet18(nn.Module):
    """torchvision's resnet18 layout (7x7 stem, maxpool, 4 x 2 BasicBlocks, fc)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for i, c in enumerate([64, 128, 256, 512]):
            s = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, c, s), BasicBlock(c, c, 1)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_model(name):
    if name == "cnn":
        return SeedCNN(), "own"
    try:
        import torchvision
        return torchvision.models.resnet18(num_classes=10), "torchvision"
    except ImportError:
        return ResNet18(10), "own (torchvision missing)"


def bench(name, mode, tf32, args, rank, world, dev):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(0)
    torch._dynamo.reset()  # each measurement compiles its own model from scratch
    model, origin = make_model(name)
    model = model.to(dev)
    ddp = DDP(model, device_ids=[dev.index])
    fwd = ddp
    if mode != "eager":
        fwd = torch.compile(ddp) if mode == "compile" else torch.compile(ddp, mode=mode)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    lossf = nn.CrossEntropyLoss()

    def step(x, y):
        loss = lossf(fwd(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    g = torch.Generator(device="cpu").manual_seed(99 + rank)
    xs = [torch.randn(args.batch, 3, 32, 32, generator=g).to(dev) for _ in range(4)]
    ys = [torch.randint(0, 10, (args.batch,), generator=g).to(dev) for _ in range(4)]
    t0 = time.perf_counter()
    for i in range(args.warmup):
        step(xs[i % 4], ys[i % 4]).item()
    torch.cuda.synchronize(dev)
    warm_s = time.perf_counter() - t0
    dist.barrier()
    torch.cuda.synchronize(dev)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(args.iters)]
    start = time.perf_counter()
    for i in range(args.iters):
        ev[i][0].record()
        step(xs[i % 4], ys[i % 4])
        ev[i][1].record()
    torch.cuda.synchronize(dev)
    wall = time.perf_counter() - start
    times = [a.elapsed_time(b) for a, b in ev]
    ips = args.iters * args.batch / wall
    rec = {"model": name, "mode": mode, "tf32": tf32, "world": world,
           "batch_per_rank": args.batch, "torch": torch.__version__, "definition": origin}
    print(json.dumps({"torch_ddp": "rank", **rec, "rank": rank,
                      "step_ms_median": round(statistics.median(times), 3),
                      "step_ms_min": round(min(times), 3), "warmup_s": round(warm_s, 3),
                      "images_per_s": round(ips, 1)}), flush=True)
    tot = torch.tensor([ips, statistics.median(times)], dtype=torch.float64, device=dev)
    dist.all_reduce(tot)
    if rank == 0:
        print(json.dumps({"torch_ddp": "total", **rec, "images_per_s": round(tot[0].item(), 1),
                          "step_ms_mean_of_medians": round(tot[1].item() / world, 3)}),
              flush=True)
    del fwd, ddp, model, opt
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--precision", default="highest")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    if "MASTER_ADDR" not in os.environ:  # run without torchrun: a world of one
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    try:  # device_id (torch >= 2.3) binds the communicator to this rank's GPU at once
        dist.init_process_group("nccl", device_id=dev)
    except TypeError:
        dist.init_process_group("nccl")
    for name in args.models.split(","):
        for prec in args.precision.split(","):
            for mode in args.modes.split(","):
                try:
                    bench(name, mode, prec != "highest", args, rank, world, dev)
                except Exception as e:
                    print(json.dumps({"torch_ddp": "error", "model": name, "mode": mode,
                                      "rank": rank, "error": repr(e)[:300]}), flush=True)
                    if mode == "eager" or not torch._dynamo.config.optimize_ddp:
                        # the ranks may now disagree on the collectives: stop here
                        dist.destroy_process_group()
                        sys.exit(1)
                    # torch.compile's DDP graph splitting (optimize_ddp) failed to compile
                    # the backward on the H200 (a stride assertion in convolution_backward's
                    # fake kernel); measure again without it, and say so
                    torch._dynamo.config.optimize_ddp = False
                    print(json.dumps({"torch_ddp": "retry", "model": name, "mode": mode,
                                      "rank": rank, "optimize_ddp": False}), flush=True)
                    bench(name, mode, prec != "highest", args, rank, world, dev)
                    torch._dynamo.config.optimize_ddp = True
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
