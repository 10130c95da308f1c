"""PyTorch's side of the GPU benchmarks, the same cases and timing as bench_gpu.c (eager: launch
and synchronize, host clock, median), plus CUDA-graph replay and torch.compile where the issue
names them. Prints "BENCH <case>[:<mode>] <seconds>"."""
import statistics
import sys
import time

import torch


def timed(fn, warmup, repeat):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeat):
        s = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - s)
    return statistics.median(ts)


def graphed(fn, warmup, repeat):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return timed(g.replay, warmup, repeat)


def report(name, sec):
    print(f"BENCH {name} {sec:.9g}", flush=True)


def main():
    # '|'-separated parts; a part selects the cases it occurs in and the groups it starts with.
    parts = [p for p in (sys.argv[1] if len(sys.argv) > 1 else "").split("|") if p]
    want = lambda n: not parts or any(p in n or p.startswith(n) for p in parts)  # noqa: E731
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    r = lambda *s, dt=torch.float32: (torch.rand(*s, device=dev) * 2 - 1).to(dt)
    if want("fma_2^28_f32"):
        a, b, c = r(1 << 28), r(1 << 28), r(1 << 28)
        f = lambda: a * b + c
        te = timed(f, 3, 20)
        report("fma_2^28_f32", te)
        report("fma_2^28_f32:graph", graphed(f, 3, 20))
        cf = torch.compile(lambda x, y, z: x * y + z)
        tc = timed(lambda: cf(a, b, c), 3, 20)
        report("fma_2^28_f32:compile", tc)
        # nuvec's compiled row beside torch's eager and compiled times (the same work).
        report("fma_2^28_f32_compiled", te)
        report("fma_2^28_f32_compiled:compile", tc)
        del a, b, c
    if want("fma_2^28_bf16"):
        a, b, c = (r(1 << 28, dt=torch.bfloat16) for _ in range(3))
        f = lambda: a * b + c
        te = timed(f, 3, 20)
        report("fma_2^28_bf16", te)
        cf = torch.compile(lambda x, y, z: x * y + z)
        tc = timed(lambda: cf(a, b, c), 3, 20)
        report("fma_2^28_bf16:compile", tc)
        report("fma_2^28_bf16_compiled", te)
        report("fma_2^28_bf16_compiled:compile", tc)
        del a, b, c
    if want("row_chain_16384x4096_f32"):
        x, w, b = r(16384, 4096), r(4096), r(4096)
        f = lambda: torch.exp(x * w + b).sum(-1)
        te = timed(f, 3, 20)
        cf = torch.compile(lambda x, w, b: torch.exp(x * w + b).sum(-1))
        tc = timed(lambda: cf(x, w, b), 3, 20)
        report("row_chain_16384x4096_f32_copy", timed(lambda: x.clone(), 3, 20))
        report("row_chain_16384x4096_f32_compiled", te)
        report("row_chain_16384x4096_f32_compiled:compile", tc)
        del x, w, b
    if want("softmax_bf16_32768x4096"):
        x = r(32768, 4096, dt=torch.bfloat16)
        report("softmax_bf16_32768x4096", timed(lambda: torch.softmax(x, -1), 3, 20))
        del x
    if want("fast_"):
        # torch's fused norms; its rope is the composition the models write (no fused kernel).
        x, w, b = r(32768, 4096, dt=torch.bfloat16), r(4096, dt=torch.bfloat16), r(4096, dt=torch.bfloat16)
        f = lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5)
        report("fast_rms_norm_bf16_32768x4096", timed(f, 3, 20))
        report("fast_rms_norm_bf16_32768x4096:graph", graphed(f, 3, 20))
        f = lambda: torch.nn.functional.layer_norm(x, (4096,), w, b, 1e-5)
        report("fast_layer_norm_bf16_32768x4096", timed(f, 3, 20))
        report("fast_layer_norm_bf16_32768x4096:graph", graphed(f, 3, 20))
        del x, w, b
        q = r(8, 32, 4096, 128, dt=torch.bfloat16)
        inv = 10000.0 ** (-torch.arange(0, 64, device=dev, dtype=torch.float32) / 64)
        th = (torch.arange(4096, device=dev, dtype=torch.float32) + 7)[:, None] * inv
        cos, sin = th.cos().to(torch.bfloat16), th.sin().to(torch.bfloat16)

        def rope():
            q1, q2 = q[..., :64], q[..., 64:]
            return torch.cat([q1 * cos - q2 * sin, q1 * sin + q2 * cos], -1)

        report("fast_rope_bf16_8x32x4096x128", timed(rope, 3, 20))
        cr = torch.compile(rope)
        report("fast_rope_bf16_8x32x4096x128:compile", timed(cr, 3, 20))
        del q
    if want("fast_state_"):
        # norm_rope: torch's fused rms_norm, then the rope the models write (cos/sin tables
        # made outside the timing); gated_delta_slots decode: the recurrent step in torch ops,
        # the states updated in place (mul_, add_), one slot per sequence in order.
        x, w = r(32768, 32, 128, dt=torch.bfloat16), r(128, dt=torch.bfloat16)
        inv = 10000.0 ** (-torch.arange(0, 64, device=dev, dtype=torch.float32) / 64)
        th = torch.arange(32768, device=dev, dtype=torch.float32)[:, None, None] * inv
        cos, sin = th.cos().to(torch.bfloat16), th.sin().to(torch.bfloat16)

        def norm_rope():
            n = torch.nn.functional.rms_norm(x, (128,), w, 1e-6)
            n1, n2 = n[..., :64], n[..., 64:]
            return torch.cat([n1 * cos - n2 * sin, n1 * sin + n2 * cos], -1)

        report("fast_state_norm_rope_bf16_32768x32x128", timed(norm_rope, 3, 20))
        report("fast_state_norm_rope_bf16_32768x32x128:compile",
               timed(torch.compile(norm_rope), 3, 20))
        del x, w, cos, sin, th
        st = r(64, 32, 128, 128)
        q, k, v = (r(64, 32, 128, dt=torch.bfloat16) for _ in range(3))
        k = k * 0.1  # |k|^2 beta < 2: the delta rule stays stable (as nuvec's row)
        g, beta = r(64, 32) * 0.01, r(64, 32)

        def delta():
            kf, qf = k.float(), q.float()
            st.mul_(g.exp()[..., None, None])
            u = (v.float() - torch.einsum("bhkv,bhk->bhv", st, kf)) * beta[..., None]
            st.add_(kf[..., :, None] * u[..., None, :])
            return (torch.einsum("bhkv,bhk->bhv", st, qf) * 0.088).to(torch.bfloat16)

        report("fast_state_gated_delta_decode_b64h32d128_f32", timed(delta, 3, 20))
        del st, q, k, v, g, beta
    if want("sum_axis"):
        x = r(64, 1024, 1024)
        for a in range(3):
            report(f"sum_axis{a}_64x1024x1024_f32", timed(lambda: x.sum(a), 3, 20))
        del x
    if want("matmul_bf16_8192"):
        a, b = r(8192, 8192, dt=torch.bfloat16), r(8192, 8192, dt=torch.bfloat16)
        report("matmul_bf16_8192", timed(lambda: a @ b, 3, 10))
        del a, b
    if want("conv2d_bf16_32x56x56x64"):
        # Channels last on both sides: nuvec's (N, H, W, C) arrays against torch's
        # channels_last memory format (BASELINES.md's setting: cuDNN's default heuristics).
        x = r(32, 64, 56, 56, dt=torch.bfloat16).to(memory_format=torch.channels_last)
        w = r(64, 64, 3, 3, dt=torch.bfloat16).to(memory_format=torch.channels_last)
        f = lambda: torch.nn.functional.conv2d(x, w, padding=1)
        report("conv2d_bf16_32x56x56x64", timed(f, 5, 20))
        report("conv2d_bf16_32x56x56x64:graph", graphed(f, 5, 20))
        del x, w
    if want("matmul_f32_4096"):
        a, b = r(4096, 4096), r(4096, 4096)
        report("matmul_f32_4096", timed(lambda: a @ b, 3, 10))
        del a, b
    if want("sdpa_") or want("paged_decode_b8h32L4096d128_bf16"):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        q, k, v = (r(8, 32, 4096, 128, dt=torch.bfloat16) for _ in range(3))
        if want("sdpa_causal_prefill_b8h32L4096d128_bf16"):
            report("sdpa_causal_prefill_b8h32L4096d128_bf16",
                   timed(lambda: sdpa(q, k, v, is_causal=True), 3, 10))
        q1 = r(8, 32, 1, 128, dt=torch.bfloat16)
        if want("sdpa_decode_b8h32L4096d128_bf16"):
            f = lambda: sdpa(q1, k, v)
            report("sdpa_decode_b8h32L4096d128_bf16", timed(f, 5, 30))
            report("sdpa_decode_b8h32L4096d128_bf16:graph", graphed(f, 5, 30))
        if want("paged_decode_b8h32L4096d128_bf16"):
            # the peer of paged attention: torch's SDPA over the same keys, contiguous
            f = lambda: sdpa(q1, k, v)
            report("paged_decode_b8h32L4096d128_bf16", timed(f, 5, 30))
            report("paged_decode_b8h32L4096d128_bf16:graph", graphed(f, 5, 30))
        del q, k, v, q1
    for name, n, m in [("qmm_decode_4bit_4096x4096", 4096, 1),
                       ("qmm_decode_4bit_14336x4096", 14336, 1),
                       ("qmm_prefill_4bit_4096x4096", 4096, 4096)]:
        # The dense bf16 layer that nuvec's 4-bit quantized_matmul replaces.
        if want(name):
            w, x = r(n, 4096, dt=torch.bfloat16), r(m, 4096, dt=torch.bfloat16)
            report(name, timed(lambda: x @ w.T, 5, 10 if m > 1 else 50))
            report(name + ":graph", graphed(lambda: x @ w.T, 5, 10 if m > 1 else 50))
            del w, x
    if want("gather_qmm_moe_8of64") or want("qmm_dense_moe_8of64"):
        # The 8-of-64 MoE layer of bench_gpu.c in bf16: each expert's tokens multiplied by its
        # matrix (the eager loop of MoE layers), beside one dense matmul of the active weights.
        E, N, K = 64, 14336, 4096
        w = r(E, N, K, dt=torch.bfloat16)
        for name, dense, pairs, rows in [("gather_qmm_moe_8of64_t1", "qmm_dense_moe_8of64_t1",
                                          8, 1),
                                         ("gather_qmm_moe_8of64_t32",
                                          "qmm_dense_moe_8of64_t32", 256, 4)]:
            if want(name):
                experts = list(range(0, E, 8)) if pairs == 8 else list(range(E))
                x = r(1 if pairs == 8 else pairs, K, dt=torch.bfloat16)
                per = pairs // E  # rows of x per expert (t32); t1: every expert takes x's row
                f = (lambda: torch.cat([x @ w[e].T for e in experts])) if pairs == 8 else \
                    (lambda: torch.cat([x[e * per:(e + 1) * per] @ w[e].T for e in experts]))
                report(name, timed(f, 5, 30))
                report(name + ":graph", graphed(f, 5, 30))
                del x
            if want(dense):
                active = 8 if pairs == 8 else E
                wd = w[:active].reshape(active * N, K)
                x = r(rows, K, dt=torch.bfloat16)
                report(dense, timed(lambda: x @ wd.T, 5, 30))
                report(dense + ":graph", graphed(lambda: x @ wd.T, 5, 30))
                del x, wd
        del w
    if want("tiny_1000") or want("eval_roundtrip"):
        y0, s, t = r(16), r(16), r(16)
        report("eval_roundtrip_1op", timed(lambda: y0 + t, 20, 64))

        def chain():
            y = y0
            for i in range(1000):
                y = y * s if i % 2 else y + t
            return y

        te = timed(chain, 5, 30)
        report("tiny_1000_ops", te)
        tg = graphed(chain, 5, 30)
        report("tiny_1000_ops:graph", tg)
        # nuvec's compiled row beside torch's eager and graphed times (the same work).
        report("tiny_1000_ops_compiled", te)
        report("tiny_1000_ops_compiled:graph", tg)
    if want("ops_"):
        # BASELINES.md's per-op rows (torch.sort and topk also return indices; nuvec's sort and
        # topk return values, as mlx.core's).
        x = r(64, 1024, 1024)
        for a in (0, 1, 2):
            report(f"ops_argmax_axis{a}", timed(lambda: x.argmax(a), 3, 20))
        for a in (2, 1):
            report(f"ops_cumsum_axis{a}", timed(lambda: x.cumsum(a), 3, 20))
        report("ops_logsumexp_axis2", timed(lambda: torch.logsumexp(x, 2), 3, 20))
        row = x[0, 0]
        report("ops_add_broadcast_row", timed(lambda: x + row, 3, 20))
        xt = x.transpose(1, 2)
        report("ops_add_transposed", timed(lambda: x + xt, 3, 20))
        report("ops_concatenate_axis1", timed(lambda: torch.cat([x, x], 1), 3, 20))
        del x, xt, row
        v = r(1 << 26)
        report("ops_sort_2^26", timed(lambda: torch.sort(v), 2, 10))
        idx = torch.randint(0, 1 << 26, (1 << 24,), device=dev)
        report("ops_take_2^24_of_2^26", timed(lambda: v[idx], 3, 20))
        del v, idx
        m = r(16384, 4096)
        report("ops_sort_rows_16384x4096", timed(lambda: torch.sort(m, 1), 2, 10))
        report("ops_topk8_rows_16384x4096", timed(lambda: torch.topk(m, 8, 1), 3, 20))
    if want("fft_rfft_64x65536_f32"):
        x = r(64, 65536)
        report("fft_rfft_64x65536_f32", timed(lambda: torch.fft.rfft(x), 5, 50))
        del x
    if want("linalg_"):
        a = r(4096, 4096, dt=torch.float64)
        spd = a @ a.T + 4096 * torch.eye(4096, device=dev, dtype=torch.float64)
        report("linalg_cholesky_f64_4096", timed(lambda: torch.linalg.cholesky(spd), 2, 10))
        report("linalg_inv_f64_4096", timed(lambda: torch.linalg.inv(spd), 2, 10))
        del a, spd
        m = r(2048, 2048)
        report("linalg_svd_f32_2048", timed(lambda: torch.linalg.svd(m), 1, 3))
        del m
    if want("mlp_train"):
        layers = [torch.nn.Linear(4096, 4096, device=dev) for _ in range(4)]
        model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.GELU())])
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x, y = r(4096, 4096), r(4096, 4096)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
            loss = ((out.float() - y) ** 2).mean()
            loss.backward()
            opt.step()

        te = timed(step, 3, 10)
        report("mlp_train_4x4096_bf16", te)
        # nuvec's compiled step beside torch's eager one (the bar: <= 0.9x its time).
        report("mlp_train_4x4096_bf16_compiled", te)


if __name__ == "__main__":
    main()
