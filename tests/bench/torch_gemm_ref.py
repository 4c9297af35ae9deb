"""cuBLAS figures (through PyTorch) for bench_cuda_gemm's timed GEMM cases, to print beside its
own TFLOP/s in the same device command: C = A B at 4096^3 and BERT-base's projections
(x [1024, K] times a weight [N, K] transposed, as nn.Linear), fp32 (exact), TF32 and bf16, fp16.
Median of 5 batches of 20 CUDA-event-timed calls after a warm-up.

    python3 tests/bench/torch_gemm_ref.py
"""
import torch

CASES = [
    ("mm 4096", "mm", 4096, 4096, 4096),
    ("linear 4096", "linear", 4096, 4096, 4096),
    ("bert qkv", "linear", 1024, 2304, 768),
    ("bert out", "linear", 1024, 768, 768),
    ("bert ffn1", "linear", 1024, 3072, 768),
    ("bert ffn2", "linear", 1024, 768, 3072),
]


def time_ms(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    meds = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(20):
            fn()
        e1.record()
        e1.synchronize()
        meds.append(e0.elapsed_time(e1) / 20)
    meds.sort()
    return meds[len(meds) // 2]


def main():
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for prec in ("fp32", "tf32", "bf16", "fp16"):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(prec, torch.float32)
        for name, kind, m, n, k in CASES:
            a = torch.randn(m, k, device=dev, dtype=dt)
            if kind == "mm":
                b = torch.randn(k, n, device=dev, dtype=dt)
                fn = lambda: torch.mm(a, b)
            else:
                w = torch.randn(n, k, device=dev, dtype=dt)
                fn = lambda: torch.nn.functional.linear(a, w)
            ms = time_ms(fn)
            print(f"cublas {name:12s} {prec}: {2.0 * m * n * k / ms / 1e9:7.1f} TFLOP/s ({ms:.4f} ms)")


if __name__ == "__main__":
    main()
