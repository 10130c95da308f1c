/* Device side of the element-wise kernels: storage types, float16/bfloat16 conversions, the
 * contiguous and strided loops, and the op semantics shared by the generic and the dedicated
 * kernels. Included by the src/cuda/elementwise_*.cu files only.
 *
 * Semantics are the CPU kernels' (src/cpu/elementwise*.c), line by line: integer arithmetic
 * wraps (computed unsigned), integer division by zero and shifts past the width are defined,
 * float16/bfloat16 compute in float32 and round once to nearest even (NaN keeps its sign and
 * payload bits as the CPU's conversions do), float64 computes in double. Where the CPU's
 * formula has a multiply feeding an add whose rounding is observable (isclose's tolerance,
 * erfinv's polynomial, complex products), the operations are written with the _rn intrinsics,
 * which nvcc never fuses into a multiply-add (the CPU build never contracts either). */
#ifndef NUVEC_CUDA_ELEMENTWISE_DEVICE_CUH
#define NUVEC_CUDA_ELEMENTWISE_DEVICE_CUH

#include <math.h>
#include <stdint.h>

#include "cuda/elementwise.h"

namespace nvew {

/* ---- Storage types ---- */

struct h16 { /* float16 bits */
  uint16_t x;
};
struct b16 { /* bfloat16 bits */
  uint16_t x;
};
struct alignas(8) c64 { /* complex64, also its compute type */
  float re, im;
};

/* float16 -> float32, exact; NaN keeps sign and payload (as nv__f16_to_f32). */
__device__ __forceinline__ float h2f(uint16_t h) {
  unsigned short hs = h;
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(hs));
  if ((h & 0x7fff) > 0x7c00)
    f = __uint_as_float(((uint32_t)(h & 0x8000) << 16) | 0x7f800000u | ((uint32_t)(h & 0x3ff) << 13));
  return f;
}

/* float32 -> float16, round to nearest even, overflow to inf; NaN as nv__f32_to_f16. */
__device__ __forceinline__ uint16_t f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    h = (unsigned short)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
  return (uint16_t)h;
}

__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* float32 -> bfloat16 exactly as nv__f32_to_bf16. */
__device__ __forceinline__ uint16_t f2bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* Storage <-> compute values. Integers, bool (uint8_t), float, double and c64 are their own
 * compute type; float16 and bfloat16 compute in float. */
template <class S>
struct tr {
  typedef S C;
  static __device__ __forceinline__ C ld(S s) { return s; }
  static __device__ __forceinline__ S st(C c) { return c; }
};
template <>
struct tr<h16> {
  typedef float C;
  static __device__ __forceinline__ float ld(h16 s) { return h2f(s.x); }
  static __device__ __forceinline__ h16 st(float c) { return h16{f2h(c)}; }
};
template <>
struct tr<b16> {
  typedef float C;
  static __device__ __forceinline__ float ld(b16 s) { return bf2f(s.x); }
  static __device__ __forceinline__ b16 st(float c) { return b16{f2bf(c)}; }
};

/* ---- Vectors of V elements moved as one load/store of V * sizeof(S) bytes ---- */

template <int BYTES>
struct rawv;
template <>
struct rawv<16> {
  typedef uint4 T;
};
template <>
struct rawv<8> {
  typedef uint2 T;
};
template <>
struct rawv<4> {
  typedef uint32_t T;
};
template <>
struct rawv<2> {
  typedef uint16_t T;
};
template <>
struct rawv<1> {
  typedef uint8_t T;
};

template <class S, int V>
struct vec {
  typedef typename rawv<(int)sizeof(S) * V>::T R;
  union {
    R raw;
    S v[V];
  };
};

template <class S, int V>
__device__ __forceinline__ vec<S, V> ldv(const S *p) {
  vec<S, V> r;
  r.raw = *reinterpret_cast<const typename vec<S, V>::R *>(p);
  return r;
}
template <class S, int V>
__device__ __forceinline__ void stv(S *p, const vec<S, V> &r) {
  *reinterpret_cast<typename vec<S, V>::R *>(p) = r.raw;
}
template <class S, int V>
__device__ __forceinline__ bool aligned(const S *p) {
  return ((uintptr_t)p & (uintptr_t)(sizeof(S) * V - 1)) == 0;
}

constexpr int cmax(int a, int b) { return a > b ? a : b; }

/* Elements per vector: 16 bytes of the widest operand. */
template <int NIN, class SO, class SA, class SB, class SC>
constexpr int vwidth() {
  return 16 / cmax(cmax((int)sizeof(SO), (int)sizeof(SA)),
                   cmax(NIN > 1 ? (int)sizeof(SB) : 1, NIN > 2 ? (int)sizeof(SC) : 1));
}


/* One output element from storage values. */
template <class F, int NIN, class SO, class SA, class SB, class SC>
__device__ __forceinline__ SO elem(const F &f, SA x, SB y, SC z) {
  if constexpr (NIN == 1) {
    (void)y;
    (void)z;
    return tr<SO>::st(f(tr<SA>::ld(x)));
  } else if constexpr (NIN == 2) {
    (void)z;
    return tr<SO>::st(f(tr<SA>::ld(x), tr<SB>::ld(y)));
  } else {
    return tr<SO>::st(f(tr<SA>::ld(x), tr<SB>::ld(y), tr<SC>::ld(z)));
  }
}

/* ---- Rows: two folded dims, the inner one contiguous or broadcast for every input ----
 * (a bias added to every row, a column broadcast along rows). The inner size and the row
 * strides of the contiguous inputs are multiples of V (the host checks), so every vector lies
 * in one row; bit k of `scalar` marks input k's inner stride 0 (one element per row). */
template <bool I32>
__device__ __forceinline__ int64_t row_of(int64_t e, const nv__ew_params &p) {
  if constexpr (I32) {
    const uint32_t i = (uint32_t)e;
    return (int64_t)((__umulhi(i, p.magic[1]) + i) >> p.shift[1]);
  } else {
    return e / p.shape[1];
  }
}

template <class F, int NIN, bool I32, class SO, class SA, class SB, class SC>
__device__ __forceinline__ void rows_loop(const F &f, SO *o, const SA *a, const SB *b,
                                          const SC *c, const nv__ew_params &p) {
  constexpr int V = vwidth<NIN, SO, SA, SB, SC>();
  constexpr int U = NV__EW_CONTIG_UNROLL;
  const int64_t n = p.n, cols = p.shape[1];
  const bool sa = (p.scalar & 2u) != 0, sb = (p.scalar & 4u) != 0, sc = (p.scalar & 8u) != 0;
  const int64_t ra = p.stride[1][0], rb = p.stride[2][0], rc = p.stride[3][0];
  const int64_t tid = (int64_t)blockIdx.x * NV__EW_BLOCK + threadIdx.x;
  const int64_t nth = (int64_t)gridDim.x * NV__EW_BLOCK;
  bool al = aligned<SO, V>(o) && (sa || aligned<SA, V>(a));
  if constexpr (NIN > 1) al = al && (sb || aligned<SB, V>(b));
  if constexpr (NIN > 2) al = al && (sc || aligned<SC, V>(c));
  if (!al) {
    for (int64_t i = tid; i < n; i += nth) {
      const int64_t r = row_of<I32>(i, p), col = i - r * cols;
      SA x = a[r * ra + (sa ? 0 : col)];
      SB y{};
      SC z{};
      if constexpr (NIN > 1) y = b[r * rb + (sb ? 0 : col)];
      if constexpr (NIN > 2) z = c[r * rc + (sc ? 0 : col)];
      o[i] = elem<F, NIN, SO, SA, SB, SC>(f, x, y, z);
    }
    return;
  }
  const int64_t nvec = n / V;
  for (int64_t base = (int64_t)blockIdx.x * NV__EW_BLOCK * U; base < nvec; base += nth * U) {
    vec<SA, V> xa[U];
    vec<SB, V> xb[U];
    vec<SC, V> xc[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t vi = base + u * NV__EW_BLOCK + threadIdx.x;
      if (vi < nvec) {
        const int64_t e = vi * V, r = row_of<I32>(e, p), col = e - r * cols;
        if (sa) {
          const SA x = a[r * ra];
#pragma unroll
          for (int j = 0; j < V; j++) xa[u].v[j] = x;
        } else {
          xa[u] = ldv<SA, V>(a + r * ra + col);
        }
        if constexpr (NIN > 1) {
          if (sb) {
            const SB y = b[r * rb];
#pragma unroll
            for (int j = 0; j < V; j++) xb[u].v[j] = y;
          } else {
            xb[u] = ldv<SB, V>(b + r * rb + col);
          }
        }
        if constexpr (NIN > 2) {
          if (sc) {
            const SC z = c[r * rc];
#pragma unroll
            for (int j = 0; j < V; j++) xc[u].v[j] = z;
          } else {
            xc[u] = ldv<SC, V>(c + r * rc + col);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t vi = base + u * NV__EW_BLOCK + threadIdx.x;
      if (vi < nvec) {
        vec<SO, V> res;
#pragma unroll
        for (int j = 0; j < V; j++) {
          SB y{};
          SC z{};
          if constexpr (NIN > 1) y = xb[u].v[j];
          if constexpr (NIN > 2) z = xc[u].v[j];
          res.v[j] = elem<F, NIN, SO, SA, SB, SC>(f, xa[u].v[j], y, z);
        }
        stv<SO, V>(o + vi * V, res);
      }
    }
  }
}

/* ---- The contiguous loop ----
 * Tiles of NV__EW_BLOCK x U vectors, grid-stride; each thread loads all its vectors before it
 * computes and stores any, so an output that is a donated input (the same elements) is read
 * before it is written, and the loads are in flight together. The < V tail elements go to the
 * first threads of the grid. Unaligned pointers take the element loop. */
template <class F, int NIN, class SO, class SA, class SB, class SC>
__device__ __forceinline__ void contig_body(SO *o, const SA *a, const SB *b, const SC *c,
                                            const nv__ew_params &p) {
  constexpr int V = vwidth<NIN, SO, SA, SB, SC>();
  constexpr int U = NV__EW_CONTIG_UNROLL;
  const F f(p);
  const int64_t n = p.n;
  o += p.off[0];
  a += p.off[1];
  if constexpr (NIN > 1) b += p.off[2];
  if constexpr (NIN > 2) c += p.off[3];
  if (p.ndim == 2) {
    if (p.idx32) rows_loop<F, NIN, true, SO, SA, SB, SC>(f, o, a, b, c, p);
    else rows_loop<F, NIN, false, SO, SA, SB, SC>(f, o, a, b, c, p);
    return;
  }
  const bool sa = (p.scalar & 2u) != 0, sb = (p.scalar & 4u) != 0, sc = (p.scalar & 8u) != 0;
  const int64_t tid = (int64_t)blockIdx.x * NV__EW_BLOCK + threadIdx.x;
  const int64_t nth = (int64_t)gridDim.x * NV__EW_BLOCK;
  bool al = aligned<SO, V>(o) && (sa || aligned<SA, V>(a));
  if constexpr (NIN > 1) al = al && (sb || aligned<SB, V>(b));
  if constexpr (NIN > 2) al = al && (sc || aligned<SC, V>(c));
  SA a0{};
  SB b0{};
  SC c0{};
  if (sa) a0 = a[0];
  if constexpr (NIN > 1)
    if (sb) b0 = b[0];
  if constexpr (NIN > 2)
    if (sc) c0 = c[0];
  if (!al) {
    for (int64_t i = tid; i < n; i += nth) {
      SA x = sa ? a0 : a[i];
      SB y = b0;
      SC z = c0;
      if constexpr (NIN > 1) y = sb ? b0 : b[i];
      if constexpr (NIN > 2) z = sc ? c0 : c[i];
      o[i] = elem<F, NIN, SO, SA, SB, SC>(f, x, y, z);
    }
    return;
  }
  const int64_t nvec = n / V;
  for (int64_t base = (int64_t)blockIdx.x * NV__EW_BLOCK * U; base < nvec; base += nth * U) {
    vec<SA, V> xa[U];
    vec<SB, V> xb[U];
    vec<SC, V> xc[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t vi = base + u * NV__EW_BLOCK + threadIdx.x;
      if (vi < nvec) {
        if (!sa) xa[u] = ldv<SA, V>(a + vi * V);
        if constexpr (NIN > 1)
          if (!sb) xb[u] = ldv<SB, V>(b + vi * V);
        if constexpr (NIN > 2)
          if (!sc) xc[u] = ldv<SC, V>(c + vi * V);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t vi = base + u * NV__EW_BLOCK + threadIdx.x;
      if (vi < nvec) {
        vec<SO, V> r;
#pragma unroll
        for (int j = 0; j < V; j++) {
          SA x = sa ? a0 : xa[u].v[j];
          SB y = b0;
          SC z = c0;
          if constexpr (NIN > 1) y = sb ? b0 : xb[u].v[j];
          if constexpr (NIN > 2) z = sc ? c0 : xc[u].v[j];
          r.v[j] = elem<F, NIN, SO, SA, SB, SC>(f, x, y, z);
        }
        stv<SO, V>(o + vi * V, r);
      }
    }
  }
  const int64_t t = nvec * V + tid;
  if (t < n) {
    SA x = sa ? a0 : a[t];
    SB y = b0;
    SC z = c0;
    if constexpr (NIN > 1) y = sb ? b0 : b[t];
    if constexpr (NIN > 2) z = sc ? c0 : c[t];
    o[t] = elem<F, NIN, SO, SA, SB, SC>(f, x, y, z);
  }
}

/* ---- The strided loop ----
 * The output is row-contiguous over the folded index space, so its offset is the linear
 * index; inputs' offsets come from the coordinates (last dim fastest). 32-bit: division by
 * magic numbers (q = (umulhi(i, m) + i) >> s, exact for i < 2^31), int32 offsets. */
template <int NIN, bool I32>
__device__ __forceinline__ void offsets(int64_t li, const nv__ew_params &p, int64_t *oa,
                                        int64_t *ob, int64_t *oc) {
  if constexpr (I32) {
    uint32_t i = (uint32_t)li;
    int32_t x = 0, y = 0, z = 0;
#pragma unroll
    for (int d = NV__EW_MAXDIMS - 1; d >= 1; d--) {
      if (d < p.ndim) {
        const uint32_t q = (__umulhi(i, p.magic[d]) + i) >> p.shift[d];
        const int32_t r = (int32_t)(i - q * (uint32_t)p.shape[d]);
        i = q;
        x += r * (int32_t)p.stride[1][d];
        if constexpr (NIN > 1) y += r * (int32_t)p.stride[2][d];
        if constexpr (NIN > 2) z += r * (int32_t)p.stride[3][d];
      }
    }
    x += (int32_t)i * (int32_t)p.stride[1][0];
    if constexpr (NIN > 1) y += (int32_t)i * (int32_t)p.stride[2][0];
    if constexpr (NIN > 2) z += (int32_t)i * (int32_t)p.stride[3][0];
    *oa = x;
    *ob = y;
    *oc = z;
  } else {
    uint64_t i = (uint64_t)li;
    int64_t x = 0, y = 0, z = 0;
#pragma unroll
    for (int d = NV__EW_MAXDIMS - 1; d >= 1; d--) {
      if (d < p.ndim) {
        const uint64_t s = (uint64_t)p.shape[d];
        const uint64_t q = i / s;
        const int64_t r = (int64_t)(i - q * s);
        i = q;
        x += r * p.stride[1][d];
        if constexpr (NIN > 1) y += r * p.stride[2][d];
        if constexpr (NIN > 2) z += r * p.stride[3][d];
      }
    }
    x += (int64_t)i * p.stride[1][0];
    if constexpr (NIN > 1) y += (int64_t)i * p.stride[2][0];
    if constexpr (NIN > 2) z += (int64_t)i * p.stride[3][0];
    *oa = x;
    *ob = y;
    *oc = z;
  }
}

template <class F, int NIN, bool I32, class SO, class SA, class SB, class SC>
__device__ __forceinline__ void strided_loop(const F &f, SO *o, const SA *a, const SB *b,
                                             const SC *c, const nv__ew_params &p) {
  constexpr int U = NV__EW_STRIDED_PER_THREAD;
  const int64_t n = p.n;
  const int64_t nth = (int64_t)gridDim.x * NV__EW_BLOCK;
  for (int64_t base = (int64_t)blockIdx.x * NV__EW_BLOCK * U; base < n; base += nth * U) {
    SA xa[U];
    SB xb[U];
    SC xc[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t i = base + u * NV__EW_BLOCK + threadIdx.x;
      if (i < n) {
        int64_t oa, ob, oc;
        offsets<NIN, I32>(i, p, &oa, &ob, &oc);
        xa[u] = a[oa];
        if constexpr (NIN > 1) xb[u] = b[ob];
        if constexpr (NIN > 2) xc[u] = c[oc];
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t i = base + u * NV__EW_BLOCK + threadIdx.x;
      if (i < n) o[i] = elem<F, NIN, SO, SA, SB, SC>(f, xa[u], xb[u], xc[u]);
    }
  }
}

template <class F, int NIN, class SO, class SA, class SB, class SC>
__device__ __forceinline__ void strided_body(SO *o, const SA *a, const SB *b, const SC *c,
                                             const nv__ew_params &p) {
  const F f(p);
  o += p.off[0];
  a += p.off[1];
  if constexpr (NIN > 1) b += p.off[2];
  if constexpr (NIN > 2) c += p.off[3];
  if (p.idx32) strided_loop<F, NIN, true, SO, SA, SB, SC>(f, o, a, b, c, p);
  else strided_loop<F, NIN, false, SO, SA, SB, SC>(f, o, a, b, c, p);
}

/* ---- The tiled loop (binary) ----
 * Output tiles of 32 (J) x 32 (L): block (x, y, z) takes L's tile x, J's tile y, batch
 * position z (each grid-stride). Thread (tx, ty) = (threadIdx.x % 32, threadIdx.x / 32)
 * first loads, for k = 0..3, a tiled input's element (j0 + tx, l0 + ty + 8k) into row ty + 8k,
 * column tx of its shared tile (consecutive tx: consecutive J, unit-strided there) and a
 * straight input's element (j0 + ty + 8k, l0 + tx) into a register (consecutive tx:
 * consecutive L); after the barrier it computes and stores output element
 * (j0 + ty + 8k, l0 + tx), reading the tiled input's value at tile[tx][ty + 8k] (rows padded
 * to 33: no bank conflicts). All loads of a tile are issued before its first store; an output
 * element's straight inputs are read by the thread that writes it (a donated straight input
 * is read before it is written; a donated input is never tiled: donation makes it
 * row-contiguous). */
template <class F, class SO, class SA, class SB>
__device__ __forceinline__ void tile_body(SO *o, const SA *a, const SB *b, const nv__ew_params &p,
                                          SA (*ta)[33], SB (*tb)[33]) {
  const F f(p);
  o += p.off[0];
  a += p.off[1];
  b += p.off[2];
  const bool ua = (p.tiled & 2u) != 0, ub = (p.tiled & 4u) != 0;
  const int tx = (int)(threadIdx.x & 31), ty = (int)(threadIdx.x >> 5);
  /* This thread's element of a tile: (tx, ty) of a tiled input, (ty, tx) of a straight one and
   * the output (J, L), then 8 rows further for each k; an operand's first element and step. */
  const int ja = ua ? tx : ty, la = ua ? ty : tx, jb = ub ? tx : ty, lb = ub ? ty : tx;
  const int64_t step_a = 8 * (ua ? p.sl[1] : p.sj[1]), step_b = 8 * (ub ? p.sl[2] : p.sj[2]),
                step_o = 8 * p.sj[0];
  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    /* The batch position's offsets (row-major; the first dim takes what is left). */
    int64_t oz = 0, az = 0, bz = 0, rest = z;
    for (int d = p.ndim - 1; d >= 0; d--) {
      const int64_t q = d > 0 ? rest / p.shape[d] : 0, idx = rest - q * p.shape[d];
      oz += idx * p.stride[0][d];
      az += idx * p.stride[1][d];
      bz += idx * p.stride[2][d];
      rest = q;
    }
    for (int64_t tj = blockIdx.y; tj < p.tiles_j; tj += gridDim.y) {
      for (int64_t tl = blockIdx.x; tl < p.tiles_l; tl += gridDim.x) {
        const int64_t j0 = tj * 32, l0 = tl * 32;
        /* Rows (along J for straight operands, L for tiled ones) left in this tile for k = 0;
         * each k moves 8 rows on. */
        const int64_t ra = (ua ? p.nl - l0 : p.nj - j0) - (ua ? la : ja),
                      rb = (ub ? p.nl - l0 : p.nj - j0) - (ub ? lb : jb);
        const bool ca = (ua ? p.nj - j0 : p.nl - l0) > (ua ? ja : la),
                   cb = (ub ? p.nj - j0 : p.nl - l0) > (ub ? jb : lb);
        const SA *pa = a + az + (j0 + ja) * p.sj[1] + (l0 + la) * p.sl[1];
        const SB *pb = b + bz + (j0 + jb) * p.sj[2] + (l0 + lb) * p.sl[2];
        SA xa[4] = {};
        SB xb[4] = {};
#pragma unroll
        for (int k = 0; k < 4; k++) {
          if (ca && ra > 8 * k) xa[k] = pa[k * step_a];
          if (cb && rb > 8 * k) xb[k] = pb[k * step_b];
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
          if (ua) ta[ty + 8 * k][tx] = xa[k];
          if (ub) tb[ty + 8 * k][tx] = xb[k];
        }
        __syncthreads();
        const int64_t ro = p.nj - j0 - ty;
        SO *po = o + oz + (j0 + ty) * p.sj[0] + (l0 + tx) * p.sl[0];
        if (p.nl - l0 > tx) {
#pragma unroll
          for (int k = 0; k < 4; k++) {
            if (ro > 8 * k) {
              const SA x = ua ? ta[tx][ty + 8 * k] : xa[k];
              const SB y = ub ? tb[tx][ty + 8 * k] : xb[k];
              po[k * step_o] = elem<F, 2, SO, SA, SB, uint8_t>(f, x, y, 0);
            }
          }
        }
        __syncthreads();
      }
    }
  }
}

/* ---- Kernels ---- */

template <class F, class SO, class SA>
__global__ void __launch_bounds__(NV__EW_BLOCK) k_contig1(SO *o, const SA *a, nv__ew_params p) {
  contig_body<F, 1, SO, SA, uint8_t, uint8_t>(o, a, nullptr, nullptr, p);
}
template <class F, class SO, class SA, class SB>
__global__ void __launch_bounds__(NV__EW_BLOCK)
    k_contig2(SO *o, const SA *a, const SB *b, nv__ew_params p) {
  contig_body<F, 2, SO, SA, SB, uint8_t>(o, a, b, nullptr, p);
}
template <class F, class SO, class SA, class SB, class SC>
__global__ void __launch_bounds__(NV__EW_BLOCK)
    k_contig3(SO *o, const SA *a, const SB *b, const SC *c, nv__ew_params p) {
  contig_body<F, 3, SO, SA, SB, SC>(o, a, b, c, p);
}
template <class F, class SO, class SA, class SB>
__global__ void __launch_bounds__(NV__EW_BLOCK, 4)
    k_tile2(SO *o, const SA *a, const SB *b, nv__ew_params p) {
  __shared__ SA ta[32][33];
  __shared__ SB tb[32][33];
  tile_body<F, SO, SA, SB>(o, a, b, p, ta, tb);
}
template <class F, class SO, class SA>
__global__ void __launch_bounds__(NV__EW_BLOCK) k_strided1(SO *o, const SA *a, nv__ew_params p) {
  strided_body<F, 1, SO, SA, uint8_t, uint8_t>(o, a, nullptr, nullptr, p);
}
template <class F, class SO, class SA, class SB>
__global__ void __launch_bounds__(NV__EW_BLOCK)
    k_strided2(SO *o, const SA *a, const SB *b, nv__ew_params p) {
  strided_body<F, 2, SO, SA, SB, uint8_t>(o, a, b, nullptr, p);
}
template <class F, class SO, class SA, class SB, class SC>
__global__ void __launch_bounds__(NV__EW_BLOCK)
    k_strided3(SO *o, const SA *a, const SB *b, const SC *c, nv__ew_params p) {
  strided_body<F, 3, SO, SA, SB, SC>(o, a, b, c, p);
}

/* allclose / array_equal: every element of the two broadcast inputs is tested (strided index
 * space, offsets from stride[1] and stride[2]); the output byte, set to 1 by a fill recorded
 * before, is cleared by any failing element, and threads stop once they see it cleared. */
template <class F, class S, bool I32>
__device__ __forceinline__ void all_loop(const F &f, volatile uint8_t *flag, const S *a,
                                         const S *b, const nv__ew_params &p) {
  constexpr int U = NV__EW_STRIDED_PER_THREAD;
  const int64_t n = p.n;
  const int64_t nth = (int64_t)gridDim.x * NV__EW_BLOCK;
  for (int64_t base = (int64_t)blockIdx.x * NV__EW_BLOCK * U; base < n; base += nth * U) {
    if (*flag == 0) return;
    bool ok = true;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t i = base + u * NV__EW_BLOCK + threadIdx.x;
      if (i < n) {
        int64_t oa, ob, oc;
        offsets<2, I32>(i, p, &oa, &ob, &oc);
        ok = ok && f(tr<S>::ld(a[oa]), tr<S>::ld(b[ob]));
      }
    }
    if (!ok) {
      *flag = 0;
      return;
    }
  }
}

template <class F, class S>
__global__ void __launch_bounds__(NV__EW_BLOCK)
    k_allclose(uint8_t *o, const S *a, const S *b, nv__ew_params p) {
  const F f(p);
  volatile uint8_t *flag = o + p.off[0];
  a += p.off[1];
  b += p.off[2];
  if (p.idx32) all_loop<F, S, true>(f, flag, a, b, p);
  else all_loop<F, S, false>(f, flag, a, b, p);
}

/* Table entries; the contiguous kernel (and the binary tiled one) is instantiated only when
 * CONTIG. */
template <bool CONTIG, class F, class SO, class SA>
inline nv__ew_entry entry1() {
  nv__ew_entry e;
  if constexpr (CONTIG) e.contig = (const void *)k_contig1<F, SO, SA>;
  else e.contig = nullptr;
  e.strided = (const void *)k_strided1<F, SO, SA>;
  e.per_thread = vwidth<1, SO, SA, uint8_t, uint8_t>() * NV__EW_CONTIG_UNROLL;
  e.tile = nullptr;
  return e;
}
template <bool CONTIG, class F, class SO, class SA, class SB>
inline nv__ew_entry entry2() {
  nv__ew_entry e;
  if constexpr (CONTIG) {
    e.contig = (const void *)k_contig2<F, SO, SA, SB>;
    e.tile = (const void *)k_tile2<F, SO, SA, SB>;
  } else {
    e.contig = nullptr;
    e.tile = nullptr;
  }
  e.strided = (const void *)k_strided2<F, SO, SA, SB>;
  e.per_thread = vwidth<2, SO, SA, SB, uint8_t>() * NV__EW_CONTIG_UNROLL;
  return e;
}
template <bool CONTIG, class F, class SO, class SA, class SB, class SC>
inline nv__ew_entry entry3() {
  nv__ew_entry e;
  if constexpr (CONTIG) e.contig = (const void *)k_contig3<F, SO, SA, SB, SC>;
  else e.contig = nullptr;
  e.strided = (const void *)k_strided3<F, SO, SA, SB, SC>;
  e.per_thread = vwidth<3, SO, SA, SB, SC>() * NV__EW_CONTIG_UNROLL;
  e.tile = nullptr;
  return e;
}

/* ---- Op selection: at run time (generic kernels) or fixed (dedicated kernels) ---- */

struct dyn_op {
  int op;
  __device__ __forceinline__ explicit dyn_op(const nv__ew_params &p) : op(p.op) {}
  __device__ __forceinline__ int get() const { return op; }
};
template <int OP>
struct fix_op {
  __device__ __forceinline__ explicit fix_op(const nv__ew_params &) {}
  __device__ __forceinline__ static constexpr int get() { return OP; }
};

/* ---- Math by compute type ---- */

#define NV__EW_M1(name, ff, fd)                                             \
  __device__ __forceinline__ float name(float x) { return ff(x); }         \
  __device__ __forceinline__ double name(double x) { return fd(x); }
NV__EW_M1(m_fabs, fabsf, fabs)
NV__EW_M1(m_exp, expf, exp)
NV__EW_M1(m_log, logf, log)
NV__EW_M1(m_sqrt, sqrtf, sqrt)
NV__EW_M1(m_floor, floorf, floor)
NV__EW_M1(m_ceil, ceilf, ceil)
NV__EW_M1(m_trunc, truncf, trunc)
NV__EW_M1(m_rint, rintf, rint)
NV__EW_M1(m_expm1, expm1f, expm1)
NV__EW_M1(m_log2, log2f, log2)
NV__EW_M1(m_log10, log10f, log10)
NV__EW_M1(m_log1p, log1pf, log1p)
NV__EW_M1(m_sin, sinf, sin)
NV__EW_M1(m_cos, cosf, cos)
NV__EW_M1(m_tan, tanf, tan)
NV__EW_M1(m_asin, asinf, asin)
NV__EW_M1(m_acos, acosf, acos)
NV__EW_M1(m_atan, atanf, atan)
NV__EW_M1(m_sinh, sinhf, sinh)
NV__EW_M1(m_cosh, coshf, cosh)
NV__EW_M1(m_tanh, tanhf, tanh)
NV__EW_M1(m_asinh, asinhf, asinh)
NV__EW_M1(m_acosh, acoshf, acosh)
NV__EW_M1(m_atanh, atanhf, atanh)
NV__EW_M1(m_erf, erff, erf)
#undef NV__EW_M1
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float m_atan2(float x, float y) { return atan2f(x, y); }
__device__ __forceinline__ double m_atan2(double x, double y) { return atan2(x, y); }

#define NV__EW_PI 3.14159265358979323846

/* ---- Unary float helpers (src/cpu/elementwise_unary.c) ---- */

__device__ __forceinline__ float sigmoid_c(float x) {
  float e = expf(-fabsf(x));
  /* one rounding after expf's: a division, not a reciprocal times e */
  return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
__device__ __forceinline__ double sigmoid_c(double x) {
  double e = exp(-fabs(x));
  double r = 1.0 / (1.0 + e);
  return x >= 0 ? r : e * r;
}

/* erfinv in double: a closed-form first guess refined by Halley steps (nv's CPU formula). */
static __device__ __noinline__ double erfinv_c(double y) {
  if (isnan(y) || fabs(y) > 1) return __longlong_as_double(0x7ff8000000000000ll);
  if (y == 0) return y;
  if (fabs(y) == 1) return copysign(__longlong_as_double(0x7ff0000000000000ll), y);
  double w = fabs(y);
  const double a = 0.147;
  double ln = log1p(-(w * w));
  double t = 2 / (NV__EW_PI * a) + ln / 2;
  double x = sqrt(sqrt(__dsub_rn(__dmul_rn(t, t), ln / a)) - t);
  for (int it = 0; it < 4; it++) {
    double f = w > 0.5 ? (1 - w) - erfc(x) : erf(x) - w;
    double step = f / (1.1283791670955126 * exp(-(x * x)));
    x -= step / __dadd_rn(1.0, __dmul_rn(x, step));
  }
  return copysign(x, y);
}

/* erfinv in float32: Giles' approximation (the CPU's coefficients, unfused). */
__device__ __forceinline__ float erfinv_c(float y) {
  if (!(fabsf(y) <= 1.0f)) return __int_as_float(0x7fc00000);
  if (fabsf(y) == 1.0f) return copysignf(__int_as_float(0x7f800000), y);
  float w = -logf((1.0f - y) * (1.0f + y)), p;
#define NV__EW_P(c) p = __fadd_rn(c, __fmul_rn(p, w))
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f;
    NV__EW_P(3.43273939e-07f);
    NV__EW_P(-3.5233877e-06f);
    NV__EW_P(-4.39150654e-06f);
    NV__EW_P(0.00021858087f);
    NV__EW_P(-0.00125372503f);
    NV__EW_P(-0.00417768164f);
    NV__EW_P(0.246640727f);
    NV__EW_P(1.50140941f);
  } else {
    w = sqrtf(w) - 3.0f;
    p = -0.000200214257f;
    NV__EW_P(0.000100950558f);
    NV__EW_P(0.00134934322f);
    NV__EW_P(-0.00367342844f);
    NV__EW_P(0.00573950773f);
    NV__EW_P(-0.0076224613f);
    NV__EW_P(0.00943887047f);
    NV__EW_P(1.00167406f);
    NV__EW_P(2.83297682f);
  }
#undef NV__EW_P
  return p * y;
}

/* NumPy's round (rint(x * 10^d) / 10^d, or rint(x / 10^-d) * 10^-d). */
__device__ __forceinline__ double round_c(double x, const nv__ew_extra &e) {
  if (e.round.decimals == 0) return rint(x);
  if (e.round.decimals > 0) return rint(x * e.round.scale) / e.round.scale;
  return rint(x / e.round.scale) * e.round.scale;
}
__device__ __forceinline__ float round_c(float x, const nv__ew_extra &e) {
  return e.round.decimals == 0 ? rintf(x) : (float)round_c((double)x, e);
}

__device__ __forceinline__ double nan_to_num_c(double x, const nv__ew_extra &e) {
  if (isnan(x)) return e.nan_to_num.nan;
  if (isinf(x)) return x > 0 ? e.nan_to_num.posinf : e.nan_to_num.neginf;
  return x;
}
__device__ __forceinline__ float nan_to_num_c(float x, const nv__ew_extra &e) {
  return (float)nan_to_num_c((double)x, e);
}

__device__ __forceinline__ float degrees_c(float x) {
  return (float)((double)x * (180.0 / NV__EW_PI));
}
__device__ __forceinline__ double degrees_c(double x) { return x * (180.0 / NV__EW_PI); }
__device__ __forceinline__ float radians_c(float x) {
  return (float)((double)x * (NV__EW_PI / 180.0));
}
__device__ __forceinline__ double radians_c(double x) { return x * (NV__EW_PI / 180.0); }

/* Unary ops of the float dtypes (float16/bfloat16/float32 compute in float, float64 in
 * double), by primitive. */
/* Negation flips the sign bit, NaN included (PTX's neg leaves a NaN's sign unspecified; the
 * CPU flips it). */
__device__ __forceinline__ float neg_bits(float x) { return __uint_as_float(__float_as_uint(x) ^ 0x80000000u); }
__device__ __forceinline__ double neg_bits(double x) {
  return __longlong_as_double(__double_as_longlong(x) ^ (long long)0x8000000000000000ull);
}

template <class C>
__device__ __forceinline__ C u_float(int op, C x, const nv__ew_extra &e) {
  switch (op) {
    case NV__PRIM_NEGATIVE: return neg_bits(x);
    case NV__PRIM_ABS: return m_fabs(x);
    case NV__PRIM_EXP: return m_exp(x);
    case NV__PRIM_LOG: return m_log(x);
    case NV__PRIM_SQRT: return m_sqrt(x);
    case NV__PRIM_SIGN: return x > 0 ? C(1) : x < 0 ? C(-1) : x == 0 ? C(0) : x;
    case NV__PRIM_RECIPROCAL: return C(1) / x;
    case NV__PRIM_FLOOR: return m_floor(x);
    case NV__PRIM_CEIL: return m_ceil(x);
    case NV__PRIM_TRUNC: return m_trunc(x);
    case NV__PRIM_ROUND: return round_c(x, e);
    case NV__PRIM_SQUARE: return x * x;
    case NV__PRIM_RSQRT: return C(1) / m_sqrt(x);
    case NV__PRIM_EXPM1: return m_expm1(x);
    case NV__PRIM_LOG2: return m_log2(x);
    case NV__PRIM_LOG10: return m_log10(x);
    case NV__PRIM_LOG1P: return m_log1p(x);
    case NV__PRIM_SIN: return m_sin(x);
    case NV__PRIM_COS: return m_cos(x);
    case NV__PRIM_TAN: return m_tan(x);
    case NV__PRIM_ARCSIN: return m_asin(x);
    case NV__PRIM_ARCCOS: return m_acos(x);
    case NV__PRIM_ARCTAN: return m_atan(x);
    case NV__PRIM_SINH: return m_sinh(x);
    case NV__PRIM_COSH: return m_cosh(x);
    case NV__PRIM_TANH: return m_tanh(x);
    case NV__PRIM_ARCSINH: return m_asinh(x);
    case NV__PRIM_ARCCOSH: return m_acosh(x);
    case NV__PRIM_ARCTANH: return m_atanh(x);
    case NV__PRIM_DEGREES: return degrees_c(x);
    case NV__PRIM_RADIANS: return radians_c(x);
    case NV__PRIM_SIGMOID: return sigmoid_c(x);
    case NV__PRIM_ERF: return m_erf(x);
    case NV__PRIM_ERFINV: return erfinv_c(x);
    case NV__PRIM_NAN_TO_NUM: return nan_to_num_c(x, e);
    default: return x;
  }
}

template <class C, class O>
struct UFloat {
  O o;
  nv__ew_extra e;
  __device__ __forceinline__ explicit UFloat(const nv__ew_params &p) : o(p), e(p.extra) {}
  __device__ __forceinline__ C operator()(C x) const { return u_float<C>(o.get(), x, e); }
};

/* ---- Binary float helpers (src/cpu/elementwise_binary.c) ---- */

/* NumPy's divmod of doubles: the floored quotient, and the remainder through *mod. */
__device__ __forceinline__ double divmod_c(double a, double b, double *mod) {
  double m = fmod(a, b);
  if (b == 0) {
    *mod = m;
    return a / b;
  }
  double div = (a - m) / b;
  if (m != 0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      div -= 1.0;
    }
  } else {
    m = copysign(0.0, b);
  }
  double fl;
  if (div != 0) {
    fl = floor(div);
    if (div - fl > 0.5) fl += 1.0;
  } else {
    fl = copysign(0.0, a / b);
  }
  *mod = m;
  return fl;
}

__device__ __forceinline__ float logaddexp_c(float a, float b) {
  if (a == b) return a + 0.69314718f;
  float d = a - b;
  if (d > 0) return a + log1pf(expf(-d));
  if (d <= 0) return b + log1pf(expf(d));
  return d;
}
__device__ __forceinline__ double logaddexp_c(double a, double b) {
  if (a == b) return a + 0.69314718055994530942;
  double d = a - b;
  if (d > 0) return a + log1p(exp(-d));
  if (d <= 0) return b + log1p(exp(d));
  return d;
}

/* Binary ops of the float dtypes; maximum/minimum propagate NaN (from either side). */
template <class C>
__device__ __forceinline__ C b_float(int op, C x, C y) {
  switch (op) {
    case NV__PRIM_ADD: return x + y;
    case NV__PRIM_SUBTRACT: return x - y;
    case NV__PRIM_MULTIPLY: return x * y;
    case NV__PRIM_DIVIDE: return x / y;
    case NV__PRIM_MAXIMUM: return x > y || x != x ? x : y;
    case NV__PRIM_MINIMUM: return x < y || x != x ? x : y;
    case NV__PRIM_FLOOR_DIVIDE: {
      double m;
      return (C)divmod_c((double)x, (double)y, &m);
    }
    case NV__PRIM_REMAINDER: {
      double m;
      divmod_c((double)x, (double)y, &m);
      return (C)m;
    }
    case NV__PRIM_POWER: return m_pow(x, y);
    case NV__PRIM_ARCTAN2: return m_atan2(x, y);
    case NV__PRIM_LOGADDEXP: return logaddexp_c(x, y);
    default: return x;
  }
}

template <class C, class O>
struct BFloat {
  O o;
  __device__ __forceinline__ explicit BFloat(const nv__ew_params &p) : o(p) {}
  __device__ __forceinline__ C operator()(C x, C y) const { return b_float<C>(o.get(), x, y); }
};

/* ---- Integers ---- */

template <class T>
struct is_signed_t {
  static constexpr bool value = (T)(-1) < (T)0;
};

__device__ __forceinline__ uint64_t ipow_c(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= base;
    e >>= 1;
    base *= base;
  }
  return r;
}

/* Signed floor division and remainder on int64 (narrower types widened first). */
__device__ __forceinline__ int64_t fdiv_i(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}
__device__ __forceinline__ int64_t rem_i(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* Binary ops of the integer dtypes (T the element type). */
template <class T>
__device__ __forceinline__ T b_int(int op, T x, T y) {
  constexpr bool S = is_signed_t<T>::value;
  constexpr int64_t W = (int64_t)sizeof(T) * 8;
  switch (op) {
    case NV__PRIM_ADD: return (T)((uint64_t)x + (uint64_t)y);
    case NV__PRIM_SUBTRACT: return (T)((uint64_t)x - (uint64_t)y);
    case NV__PRIM_MULTIPLY: return (T)((uint64_t)x * (uint64_t)y);
    case NV__PRIM_MAXIMUM: return x > y ? x : y;
    case NV__PRIM_MINIMUM: return x < y ? x : y;
    case NV__PRIM_FLOOR_DIVIDE:
      if constexpr (S) return (T)fdiv_i((int64_t)x, (int64_t)y);
      else return y == 0 ? (T)0 : (T)(x / y);
    case NV__PRIM_REMAINDER:
      if constexpr (S) return (T)rem_i((int64_t)x, (int64_t)y);
      else return y == 0 ? x : (T)(x % y);
    case NV__PRIM_POWER:
      if constexpr (S) return y < 0 ? (T)0 : (T)ipow_c((uint64_t)x, (uint64_t)y);
      else return (T)ipow_c((uint64_t)x, (uint64_t)y);
    case NV__PRIM_BITWISE_AND: return (T)(x & y);
    case NV__PRIM_BITWISE_OR: return (T)(x | y);
    case NV__PRIM_BITWISE_XOR: return (T)(x ^ y);
    case NV__PRIM_LEFT_SHIFT:
      if constexpr (S) return y >= 0 && (int64_t)y < W ? (T)((uint64_t)x << y) : (T)0;
      else return (uint64_t)y < (uint64_t)W ? (T)((uint64_t)x << y) : (T)0;
    case NV__PRIM_RIGHT_SHIFT:
      if constexpr (S) return y >= 0 && (int64_t)y < W ? (T)(x >> y) : (T)(x < 0 ? -1 : 0);
      else return (uint64_t)y < (uint64_t)W ? (T)(x >> y) : (T)0;
    default: return x;
  }
}

template <class T, class O>
struct BInt {
  O o;
  __device__ __forceinline__ explicit BInt(const nv__ew_params &p) : o(p) {}
  __device__ __forceinline__ T operator()(T x, T y) const { return b_int<T>(o.get(), x, y); }
};

/* Bool (bytes 0/1): the CPU's bool rows, byte-wise as it computes them. */
__device__ __forceinline__ uint8_t b_bool(int op, uint8_t x, uint8_t y) {
  switch (op) {
    case NV__PRIM_ADD:
    case NV__PRIM_MAXIMUM:
    case NV__PRIM_BITWISE_OR: return (uint8_t)(x | y);
    case NV__PRIM_MULTIPLY:
    case NV__PRIM_MINIMUM:
    case NV__PRIM_BITWISE_AND: return (uint8_t)(x & y);
    case NV__PRIM_BITWISE_XOR: return (uint8_t)(x ^ y);
    case NV__PRIM_FLOOR_DIVIDE: return (uint8_t)(x && y);
    case NV__PRIM_REMAINDER: return (uint8_t)(x && !y);
    case NV__PRIM_POWER: return (uint8_t)(x || !y);
    default: return x;
  }
}

template <class O>
struct BBool {
  O o;
  __device__ __forceinline__ explicit BBool(const nv__ew_params &p) : o(p) {}
  __device__ __forceinline__ uint8_t operator()(uint8_t x, uint8_t y) const {
    return b_bool(o.get(), x, y);
  }
};

/* Integers rounded to a multiple of q = 10^-d, halves to even (q = 0: beyond 2^64). */
__device__ __forceinline__ uint64_t iround_u(uint64_t v, uint64_t q) {
  if (!q) return 0;
  uint64_t k = v / q, r = v % q;
  if (r > q - r || (r == q - r && (k & 1))) k++;
  return k * q;
}
__device__ __forceinline__ int64_t iround_i(int64_t v, uint64_t q) {
  uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  uint64_t r = iround_u(m, q);
  return v < 0 ? (int64_t)(0 - r) : (int64_t)r;
}

/* Unary ops of the integer dtypes. */
template <class T>
__device__ __forceinline__ T u_int(int op, T x, const nv__ew_extra &e) {
  constexpr bool S = is_signed_t<T>::value;
  switch (op) {
    case NV__PRIM_NEGATIVE: return (T)((uint64_t)0 - (uint64_t)x);
    case NV__PRIM_ABS:
      if constexpr (S) return (T)(x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x);
      else return x;
    case NV__PRIM_SIGN: return (T)(x > 0 ? 1 : x == 0 ? 0 : -1);
    case NV__PRIM_ROUND:
      if constexpr (S) return (T)iround_i((int64_t)x, e.round.iscale);
      else return (T)iround_u((uint64_t)x, e.round.iscale);
    case NV__PRIM_SQUARE: return (T)((uint64_t)x * (uint64_t)x);
    case NV__PRIM_BITWISE_INVERT: return (T)~x;
    default: return x;
  }
}

template <class T, class O>
struct UInt {
  O o;
  nv__ew_extra e;
  __device__ __forceinline__ explicit UInt(const nv__ew_params &p) : o(p), e(p.extra) {}
  __device__ __forceinline__ T operator()(T x) const { return u_int<T>(o.get(), x, e); }
};

/* Bool unary: abs and square are the identity, bitwise_invert is logical not. */
template <class O>
struct UBool {
  O o;
  __device__ __forceinline__ explicit UBool(const nv__ew_params &p) : o(p) {}
  __device__ __forceinline__ uint8_t operator()(uint8_t x) const {
    return o.get() == NV__PRIM_BITWISE_INVERT ? (uint8_t)!x : x;
  }
};

/* ---- Bool-valued tests (any real dtype; C the compute type) ---- */

template <class C>
struct is_float_t {
  static constexpr bool value = (C)0.5 != (C)0;
};

template <class C>
__device__ __forceinline__ bool u_test(int op, C x) {
  if constexpr (is_float_t<C>::value) {
    switch (op) {
      case NV__PRIM_LOGICAL_NOT: return x == 0;
      case NV__PRIM_ISNAN: return isnan(x);
      case NV__PRIM_ISINF: return isinf(x);
      case NV__PRIM_ISFINITE: return isfinite(x);
      case NV__PRIM_ISPOSINF: return x > 0 && isinf(x);
      case NV__PRIM_ISNEGINF: return x < 0 && isinf(x);
      default: return false;
    }
  } else {
    switch (op) {
      case NV__PRIM_LOGICAL_NOT: return x == 0;
      case NV__PRIM_ISFINITE: return true;
      default: return false;
    }
  }
}

template <class C, class O>
struct UTest {
  O o;
  __device__ __forceinline__ explicit UTest(const nv__ew_params &p) : o(p) {}
  __device__ __forceinline__ bool operator()(C x) const { return u_test<C>(o.get(), x); }
};

/* isclose in double: equal values (infinities included) are close, NaN only to NaN with
 * equal_nan, other non-finite values to nothing; |a - b| <= atol + rtol * |b| unfused. */
__device__ __forceinline__ bool close_d(double a, double b, const nv__ew_extra &e) {
  if (a == b) return true;
  if (isnan(a) || isnan(b)) return e.close.equal_nan && isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return false;
  return fabs(a - b) <= __dadd_rn(e.close.atol, __dmul_rn(e.close.rtol, fabs(b)));
}

/* Comparisons, logical ops, isclose and array_equal's element test of the real dtypes. */
template <class C>
__device__ __forceinline__ bool b_pred(int op, C x, C y, const nv__ew_extra &e) {
  switch (op) {
    case NV__PRIM_EQUAL: return x == y;
    case NV__PRIM_NOT_EQUAL: return x != y;
    case NV__PRIM_GREATER: return x > y;
    case NV__PRIM_GREATER_EQUAL: return x >= y;
    case NV__PRIM_LESS: return x < y;
    case NV__PRIM_LESS_EQUAL: return x <= y;
    case NV__PRIM_LOGICAL_AND: return x != 0 && y != 0;
    case NV__PRIM_LOGICAL_OR: return x != 0 || y != 0;
    case NV__PRIM_LOGICAL_XOR: return (x != 0) != (y != 0);
    case NV__PRIM_ISCLOSE:
    case NV__PRIM_ALLCLOSE: return close_d((double)x, (double)y, e);
    case NV__PRIM_ARRAY_EQUAL:
      if constexpr (is_float_t<C>::value)
        return x == y || (e.close.equal_nan && isnan(x) && isnan(y));
      else return x == y;
    default: return false;
  }
}

template <class C, class O>
struct BPred {
  O o;
  nv__ew_extra e;
  __device__ __forceinline__ explicit BPred(const nv__ew_params &p) : o(p), e(p.extra) {}
  __device__ __forceinline__ bool operator()(C x, C y) const { return b_pred<C>(o.get(), x, y, e); }
};

/* where: the condition byte selects x (nonzero) or y, moved as raw bits. */
struct Where {
  __device__ __forceinline__ explicit Where(const nv__ew_params &) {}
  template <class T>
  __device__ __forceinline__ T operator()(uint8_t c, T x, T y) const {
    return c ? x : y;
  }
};

}  // namespace nvew

#endif
