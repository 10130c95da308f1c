#!/usr/bin/env bash
# The GPU benchmarks beside PyTorch on the same machine, one run: nuvec's bench_gpu (C) and
# bench_torch.py, then a table of times and ratios (PyTorch time / nuvec time: above 1 means
# nuvec is faster). NUVEC_BUILD names the build folder (default build).
set -u
B=${NUVEC_BUILD:-build}
cd "$(dirname "$0")/../.."
$B/bench/gpu/bench_gpu "${1:-}" > /tmp/bench_nuvec.txt 2>&1; echo "nuvec rc=$?"
# The causal prefill once more on nuvec's own tensor-core kernel (NUVEC_CUDNN_SDPA=0), as row
# ..._mma (the main row takes cuDNN's fused attention, the default where libcudnn.so.9 loads);
# NUVEC_LOG_FALLBACK=1 names the engine cuDNN chose, or why it declined the shape.
if [ -z "${1:-}" ] || [[ "sdpa_causal_prefill_b8h32L4096d128_bf16" == *"${1:-}"* ]] || [[ "${1:-}" == *sdpa_* ]]; then
  NUVEC_CUDNN_SDPA=0 $B/bench/gpu/bench_gpu sdpa_causal_prefill_b8h32L4096d128_bf16 2>&1 |
    grep "^BENCH sdpa_causal_prefill" | sed 's/^BENCH sdpa_causal_prefill_b8h32L4096d128_bf16 /BENCH sdpa_causal_prefill_b8h32L4096d128_bf16_mma /' >> /tmp/bench_nuvec.txt
  NUVEC_LOG_FALLBACK=1 $B/bench/gpu/bench_gpu sdpa_causal_prefill_b8h32L4096d128_bf16 2>&1 |
    grep "cuDNN" | head -5 | sed 's/^/DIAG /' >> /tmp/bench_nuvec.txt
fi
python3 bench/gpu/bench_torch.py "${1:-}" > /tmp/bench_torch.txt 2>&1; echo "torch rc=$?"
# Where the host's time goes, in a second pass with the profile on (its clock reads cost time,
# so the timed pass above runs without it): DIAG lines only. A run of some cases only (an
# argument) skips this and charlm.
: > /tmp/bench_profile.txt
[ -z "${1:-}" ] && for c in fma tiny mlp; do
  NUVEC_GPU_PROFILE=1 $B/bench/gpu/bench_gpu $c 2>&1 | grep "^DIAG" | grep -v "warm-up\|inputs" | sed 's/^DIAG /DIAG profiled /'
done > /tmp/bench_profile.txt
# charlm's training step, GPU against CPU (the same binary, the default device switched).
: > /tmp/charlm_gpu.txt; : > /tmp/charlm_cpu.txt
if [ -z "${1:-}" ]; then
  NUVEC_DEFAULT_DEVICE=gpu timeout 60 $B/examples/charlm_step_bench > /tmp/charlm_gpu.txt 2>&1
  NUVEC_DEFAULT_DEVICE=cpu timeout 60 $B/examples/charlm_step_bench > /tmp/charlm_cpu.txt 2>&1
fi
sed 's/BENCH charlm_step/BENCH charlm_step_gpu/' /tmp/charlm_gpu.txt >> /tmp/bench_nuvec.txt
sed 's/BENCH charlm_step/BENCH charlm_step_gpu/' /tmp/charlm_cpu.txt | sed 's/charlm_step_gpu/charlm_step_gpu:cpu/' >> /tmp/bench_torch.txt
cat /tmp/bench_nuvec.txt /tmp/bench_torch.txt
cat /tmp/bench_profile.txt
python3 - <<'PY'
import re
def load(p):
    d = {}
    for line in open(p):
        m = re.match(r"BENCH (\S+) (\S+)", line)
        if m: d[m.group(1)] = float(m.group(2))
    return d
nv, th = load("/tmp/bench_nuvec.txt"), load("/tmp/bench_torch.txt")
work = {  # bytes moved or flops, for rates
    "fma_2^28_f32": ("TB/s", 4 * 4 * 2**28),
    "fma_2^28_f32_compiled": ("TB/s", 4 * 4 * 2**28), "tiny_1000_ops_compiled": ("us/op", 1000),
    "softmax_bf16_32768x4096": ("TB/s", 2 * 2 * 32768 * 4096),
    "fast_rms_norm_bf16_32768x4096": ("TB/s", 2 * 2 * 32768 * 4096),
    "fast_layer_norm_bf16_32768x4096": ("TB/s", 2 * 2 * 32768 * 4096),
    "fast_rope_bf16_8x32x4096x128": ("TB/s", 2 * 2 * 8 * 32 * 4096 * 128),
    "fast_state_norm_rope_bf16_32768x32x128": ("TB/s", 2 * 2 * 32768 * 32 * 128),
    # the f32 state read and written, q, k, v (bf16) read and o (bf16) written
    "fast_state_gated_delta_decode_b64h32d128_f32": ("TB/s", 2 * 4 * 64 * 32 * 128 * 128
                                                     + 4 * 2 * 64 * 32 * 128),
    "sum_axis0_64x1024x1024_f32": ("TB/s", 4 * 64 * 2**20), "sum_axis1_64x1024x1024_f32": ("TB/s", 4 * 64 * 2**20),
    "sum_axis2_64x1024x1024_f32": ("TB/s", 4 * 64 * 2**20),
    "matmul_bf16_8192": ("TFLOP/s", 2 * 8192**3), "matmul_f32_4096": ("TFLOP/s", 2 * 4096**3),
    "tiny_1000_ops": ("us/op", 1000), "mlp_train_4x4096_bf16": ("TFLOP/s", 3 * 2 * 4 * 4096**3),
    "mlp_train_4x4096_bf16_compiled": ("TFLOP/s", 3 * 2 * 4 * 4096**3),
    "fma_2^28_bf16": ("TB/s", 4 * 2 * 2**28), "fma_2^28_bf16_compiled": ("TB/s", 4 * 2 * 2**28),
    # the row chain reads x (its rows' sums are 1/4096 of it); the copy reads and writes x
    "row_chain_16384x4096_f32_compiled": ("TB/s", 4 * 16384 * 4096),
    "row_chain_16384x4096_f32_copy": ("TB/s", 2 * 4 * 16384 * 4096),
    "ops_cumsum_axis2": ("TB/s", 8 * 64 * 2**20), "ops_cumsum_axis1": ("TB/s", 8 * 64 * 2**20),
    "ops_logsumexp_axis2": ("TB/s", 4 * 64 * 2**20), "ops_add_broadcast_row": ("TB/s", 8 * 64 * 2**20),
    "ops_add_transposed": ("TB/s", 12 * 64 * 2**20), "ops_concatenate_axis1": ("TB/s", 16 * 64 * 2**20),
    "ops_take_2^24_of_2^26": ("TB/s", 12 * 2**24),
    "conv2d_bf16_32x56x56x64": ("TFLOP/s", 2 * 32 * 56 * 56 * 64 * 9 * 64),
    "sdpa_causal_prefill_b8h32L4096d128_bf16": ("TFLOP/s", 2 * 8 * 32 * 4096**2 * 128),
    "sdpa_causal_prefill_b8h32L4096d128_bf16_mma": ("TFLOP/s", 2 * 8 * 32 * 4096**2 * 128),
    "sdpa_decode_b8h32L4096d128_bf16": ("TB/s", 2 * 2 * 8 * 32 * 4096 * 128),
    "linalg_cholesky_f64_4096": ("TFLOP/s", 4096**3 / 3), "linalg_inv_f64_4096": ("TFLOP/s", 2 * 4096**3),
    # quantized_matmul: the packed 4-bit weights (with bf16 scales and biases per 64) streamed.
    "qmm_decode_4bit_4096x4096": ("TB/s", 4096 * 4096 // 2 + 4096 * 64 * 4),
    "qmm_decode_4bit_14336x4096": ("TB/s", 14336 * 4096 // 2 + 14336 * 64 * 4),
    "qmm_prefill_4bit_4096x4096": ("TFLOP/s", 2 * 4096**3),
    # gather_qmm: the active experts' packed weights (8 and 64 of 14336 x 4096) streamed.
    "gather_qmm_moe_8of64_t1": ("TB/s", 8 * (14336 * 4096 // 2 + 14336 * 64 * 4)),
    "qmm_dense_moe_8of64_t1": ("TB/s", 8 * (14336 * 4096 // 2 + 14336 * 64 * 4)),
    "gather_qmm_moe_8of64_t32": ("TB/s", 64 * (14336 * 4096 // 2 + 14336 * 64 * 4)),
    "qmm_dense_moe_8of64_t32": ("TB/s", 64 * (14336 * 4096 // 2 + 14336 * 64 * 4)),
}
for a in range(3): work[f"ops_argmax_axis{a}"] = ("TB/s", 4 * 64 * 2**20)
print("(charlm_step_gpu: the 'torch graph' column holds nuvec's own CPU step for the GPU/CPU ratio)")
print("=== table (median times; ratio = torch eager / nuvec; >1: nuvec faster)")
print(f"{'case':30s} {'nuvec':>10s} {'torch':>10s} {'ratio':>6s} {'nuvec rate':>14s} {'torch graph':>11s} {'torch compile':>13s}")
for k, t in nv.items():
    u, w = work.get(k, ("", 0))
    tt = th.get(k) or th.get(k.removesuffix("_mma"))
    rate = (f"{t*1e6/w:.2f} {u}" if u == "us/op" else f"{w/t/1e12:.2f} {u}") if w else ""
    g, c = th.get(k + ":graph") or th.get(k + ":cpu"), th.get(k + ":compile")
    print(f"{k:30s} {t*1e3:9.3f}ms {tt*1e3 if tt else float('nan'):9.3f}ms {tt/t if tt else float('nan'):6.2f} {rate:>14s} "
          f"{(g*1e3 if g else float('nan')):9.3f}ms {(c*1e3 if c else float('nan')):11.3f}ms")
PY
