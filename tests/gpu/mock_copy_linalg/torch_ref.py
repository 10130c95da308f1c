"""PyTorch's figures for the same operations, on the same GPU (reference for the harness)."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"


def bench(f, iters=10):
    f()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best


x = torch.zeros(1 << 28, device=dev)
ms = bench(lambda: x.clone())
print(f"torch copy f32 2^28: {ms:.3f} ms {2*4*(1<<28)/ms/1e6:.0f} GB/s")
ms = bench(lambda: x.to(torch.bfloat16))
print(f"torch astype f32->bf16 2^28: {ms:.3f} ms {6*(1<<28)/ms/1e6:.0f} GB/s")
y = x.view(1 << 14, 1 << 14)
ms = bench(lambda: y.t().contiguous())
print(f"torch transpose copy f32 16384^2: {ms:.3f} ms {2*4*(1<<28)/ms/1e6:.0f} GB/s")
del x, y
for dt, n in [(torch.bfloat16, 8192), (torch.float32, 4096), (torch.float16, 8192),
              (torch.float64, 4096), (torch.complex64, 2048), (torch.float32, 8192)]:
    a = torch.ones(n, n, dtype=dt, device=dev)
    b = torch.ones(n, n, dtype=dt, device=dev)
    ms = bench(lambda: a @ b, 5)
    fl = 2.0 * n ** 3 * (4 if dt == torch.complex64 else 1)
    print(f"torch matmul {dt} {n}^3: {ms:.3f} ms {fl/ms/1e9:.1f} TFLOP/s")
a = torch.ones(8192, 8192, dtype=torch.bfloat16, device=dev)
ms = bench(lambda: a.t() @ a, 5)
print(f"torch matmul bf16 8192^3 a.T@a: {ms:.3f} ms {2.0*8192**3/ms/1e9:.1f} TFLOP/s")
x = torch.ones(64, 512, 512, dtype=torch.bfloat16, device=dev)
ms = bench(lambda: x @ x, 5)
print(f"torch matmul bf16 batched 64x512^3: {ms:.3f} ms {64*2.0*512**3/ms/1e9:.1f} TFLOP/s")
