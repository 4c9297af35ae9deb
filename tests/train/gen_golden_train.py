#!/usr/bin/env python3
"""Golden files for tests/train/test_train_parity.c: PyTorch (CPU, fp32) training runs that
libtgc must reproduce.

Two models, each trained from the same initial weights on the same batches for STEPS steps
with each of two optimizers:

  cnn     the seed's CNN (examples/models/seed_cnn.h; parameters named conv1/conv2/conv3/fc as
          tgc names them), full size: Conv(3->32, k3, p2) - ReLU - MaxPool(3, s2) - ... -
          AdaptiveAvgPool(8) - Linear(8192 -> 10).
  resnet  torchvision's ResNet18 layout (examples/models/resnet18.h; state_dict names) with
          num_classes 10 but NARROWED to keep the test fast and the goldens small: base width
          RESNET_WIDTH = 4 channels instead of torchvision's 64 (layers of 4, 8, 16, 32
          channels). Same blocks, strides, downsamples, batch norms (training mode, running
          statistics updated) as the full network.

Batches: BATCH = 8 images of 3x32x32 (small, so that the CI test runs in seconds), generated
by a counter-based integer hash that tests/train/train_util.h computes identically in C, so
no batch is stored: x values are k * 2^-22 - 2 for a 24-bit k (exact in fp32), labels in
0..9. Step s uses batch s.

Optimizers (PyTorch's torch.optim, default foreach implementation):
  sgd   SGD(lr=1e-3 for the CNN, 3e-4 for the ResNet; momentum=0.9, weight_decay=5e-4)
  adam  Adam(lr=1e-3 for the CNN, 3e-4 for the ResNet; eps=1e-4)  (betas 0.9/0.999, no
        weight decay)
each step: zero_grad, forward (train mode), F.cross_entropy (mean), backward, step.

Conditioning. The goldens are computed in float64 (the same PyTorch code, model and batches
in double) and stored rounded to fp32, so they carry no fp32 rounding of their own; the
script also runs every case in fp32 and records in meta.json how far PyTorch's own fp32 run
lands from the float64 one ("fp32_spread": the worst relative difference of a loss, of a
tensor), and refuses to write goldens when a spread exceeds 5e-5, half of the test's
1e-4 (PyTorch fp32 is then within half the tolerance of the goldens, and so should libtgc
be). That is what fixes the hyperparameters: training on random labels is chaotic enough that fp32 rounding alone moved PyTorch's fp32 run 2.5e-4 (seed CNN, SGD lr 0.01) to 1.1
(narrow ResNet, SGD lr 0.01: batch norm over 8 values at layer4's 1x1 maps) from its float64
run after 20 steps, and Adam's default eps 1e-8 let it move 4e-3 (normalized steps of
near-zero gradients); with these settings the spreads are 3.3e-5 and below (at lr 1e-3 the
ResNet's spread 1.05e-4 with SGD and 4.6e-5 with Adam, hence 3e-4 for both there).

Files (tests/train/golden/, safetensors, fp32, tgc's dotted names == PyTorch state_dict keys,
without batch norm's num_batches_tracked):
  <model>_init.safetensors            initial parameters and buffers
  <model>_<opt>.safetensors           parameters and buffers after STEPS steps, plus "losses"
                                      [STEPS] (the loss of each step, before its update)
  meta.json                           hyperparameters, the losses as text, batch checksums,
                                      the torch version that wrote them

Run (writes the goldens in place; commit them):
  python3 -m venv .venv-train
  .venv-train/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu \
      safetensors numpy            # or plain `pip install torch safetensors numpy`
  .venv-train/bin/python tests/train/gen_golden_train.py
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

STEPS = 20
BATCH = 8
RESNET_WIDTH = 4
SEED = 20261201
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")

SGD_OPTS = dict(lr=1e-3, momentum=0.9, weight_decay=5e-4)
SGD_LR = {"cnn": 1e-3, "resnet": 3e-4}
ADAM_LR = {"cnn": 1e-3, "resnet": 3e-4}
ADAM_OPTS = dict(lr=1e-3, eps=1e-4)
MAX_SPREAD = 5e-5

M64 = (1 << 64) - 1


# ---- batches: the same integer hash as tests/train/train_util.h ----

def mix64(z):
    """splitmix64's finalizer of z + golden gamma, on uint64 arrays (wrapping)."""
    z = (z + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(M64)
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(M64)
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(M64)
    return z ^ (z >> np.uint64(31))


def batch(step, n=BATCH):
    """x float32 [n, 3, 32, 32], y int64 [n] of batch `step`."""
    count = n * 3 * 32 * 32
    with np.errstate(over="ignore"):
        keys = (np.uint64(step) << np.uint64(32)) | np.arange(count, dtype=np.uint64)
        k = mix64(keys) >> np.uint64(40)  # 24 bits
        x = (k.astype(np.float64) * 2.0 ** -22 - 2.0).astype(np.float32)
        lkeys = (np.uint64(step + 1000) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
        y = (mix64(lkeys) >> np.uint64(33)) % np.uint64(10)
    return (torch.from_numpy(x.reshape(n, 3, 32, 32)).clone(),
            torch.from_numpy(y.astype(np.int64)).clone())


# ---- models ----

class SeedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=2)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=2)
        self.fc = nn.Linear(128 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 3, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 3, 2)
        x = F.adaptive_avg_pool2d(F.relu(self.conv3(x)), 8)
        return self.fc(torch.flatten(x, 1))


class BasicBlock(nn.Module):
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
    """torchvision.models.resnet18's layout and init with a base width parameter."""

    def __init__(self, width=64, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        layers, cin = [], width
        for i in range(4):
            w = width << i
            layers.append(nn.Sequential(BasicBlock(cin, w, 1 if i == 0 else 2),
                                        BasicBlock(w, w, 1)))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(width * 8, num_classes)
        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def state(model):
    """fp32 contiguous copies of every parameter and buffer, without num_batches_tracked."""
    return {k: v.detach().to(torch.float32).contiguous().clone()
            for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}


def train(model, init, opt_name, dtype=torch.float64, sgd_lr=SGD_OPTS["lr"],
          adam_lr=ADAM_OPTS["lr"]):
    """STEPS steps in dtype from init; the losses and the final state (fp32)."""
    model = model.to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in init.items()}, strict=False)
    model.train()
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), **dict(SGD_OPTS, lr=sgd_lr))
    else:
        opt = torch.optim.Adam(model.parameters(), **dict(ADAM_OPTS, lr=adam_lr))
    losses = []
    for s in range(STEPS):
        x, y = batch(s)
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(dtype)), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, state(model)


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    meta = {"torch": torch.__version__, "steps": STEPS, "batch": BATCH,
            "resnet_width": RESNET_WIDTH, "sgd": SGD_OPTS, "sgd_lr": SGD_LR, "adam_lr": ADAM_LR,
            "adam": ADAM_OPTS,
            "loss": "cross_entropy mean", "computed_in": "float64, stored as fp32",
            "batches": {}, "losses": {}, "fp32_spread": {}}
    for s in (0, 1, STEPS - 1):
        x, y = batch(s)
        meta["batches"][str(s)] = {"x_sum": float(x.double().sum()),
                                   "x_first": [float(v) for v in x.flatten()[:4]],
                                   "y": [int(v) for v in y]}
    for name, make in (("cnn", SeedCNN), ("resnet", lambda: ResNet18(RESNET_WIDTH))):
        torch.manual_seed(SEED)
        model = make()
        init = state(model)
        save_file(init, os.path.join(OUT, f"{name}_init.safetensors"))
        for opt_name in ("sgd", "adam"):
            losses, final = train(make(), init, opt_name, torch.float64, SGD_LR[name],
                                  ADAM_LR[name])
            l32, f32 = train(make(), init, opt_name, torch.float32, SGD_LR[name], ADAM_LR[name])
            loss_spread = max(abs(a - b) / abs(b) for a, b in zip(l32, losses))
            spread, worst = max(((f32[k].double() - final[k].double()).abs().max().item() /
                                 max(final[k].double().abs().max().item(), 1e-30), k)
                                for k in final)
            meta["fp32_spread"][f"{name}_{opt_name}"] = {"losses": loss_spread,
                                                         "tensors": spread, "worst": worst}
            print(f"{name} {opt_name}: loss {losses[0]:.6f} -> {losses[-1]:.6f}; PyTorch fp32 "
                  f"vs float64: losses {loss_spread:.2e}, tensors {spread:.2e} ({worst})")
            if max(loss_spread, spread) > MAX_SPREAD:
                sys.exit(f"{name} {opt_name}: fp32 spread above {MAX_SPREAD}: ill-conditioned "
                         "goldens, not written")
            final["losses"] = torch.tensor(losses, dtype=torch.float32)
            save_file(final, os.path.join(OUT, f"{name}_{opt_name}.safetensors"))
            meta["losses"][f"{name}_{opt_name}"] = losses
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"wrote {OUT}: {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
