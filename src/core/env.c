/* Every environment variable nuvec reads, with its default:
 *
 *   NUVEC_NUM_THREADS     threads of the CPU kernel pool (matrix products included: OpenBLAS
 *                         itself stays single-threaded); default: the cores
 *                         available to the process.
 *   NUVEC_BFS_MAX_WIDTH   breadth-first width of the evaluation order before it goes depth
 *                         first; default 20 (MLX's MLX_BFS_MAX_WIDTH).
 *   NUVEC_CACHE_LIMIT     bytes the buffer cache may hold; default: the memory limit.
 *   NUVEC_MEMORY_LIMIT    the hard memory limit in bytes; default: the machine's memory.
 *   NUVEC_DEBUG_GUARDS    1: sentinel guards around every data buffer, checked when it is
 *                         freed (nv_get_guard_violations); default off.
 *   NUVEC_DEFAULT_DEVICE  cpu, gpu or gpu:N: the initial default device; default gpu:0 where a
 *                         usable CUDA device exists, else cpu.
 *   NUVEC_GPU_MEMORY_LIMIT  the hard limit of each GPU's memory in bytes; default: the
 *                         device's memory.
 *   NUVEC_LOG_FALLBACK    1: name on stderr each GPU node that ran its CPU kernel (no CUDA
 *                         kernel), and each attention shape cuDNN declined (with cuDNN's
 *                         reason, once per shape); default off.
 *   NUVEC_ENABLE_TF32     1 (or MLX's MLX_ENABLE_TF32=1): float32 matrix products on the GPU
 *                         use TF32 tensor cores; default off (full float32).
 *   NUVEC_CUDNN           0: GPU convolutions never use cuDNN (nuvec's own kernel); 1: they
 *                         require it ("cuDNN not found" where it is missing); default: cuDNN
 *                         where libcudnn.so.9 loads. It does not govern attention (below).
 *   NUVEC_CUDNN_SDPA      the prefill nodes of cuDNN's attention path (float16/bfloat16, no
 *                         mask array, no sinks, positive scale: src/cuda/fast_sdpa_cudnn.c).
 *                         Default (or auto): cuDNN's fused attention where libcudnn.so.9
 *                         loads and its graph finalizes, else nuvec's kernel; 1: require it
 *                         (an error where cuDNN is missing or cannot run one); 0: nuvec's own
 *                         kernels only.
 *   NUVEC_QMV_TC          1: the decode gemv of 4-bit affine float16/bfloat16 products takes
 *                         the tensor-core kernel (src/cuda/quantize.c, read at each recording);
 *                         default off (the streaming kernel).
 *   NUVEC_QMV_V2          0: the decode gemv of one row of x (quantized_matmul, and gather_qmm
 *                         by pair) with affine 2-, 4- or 8-bit codes takes the streaming kernel
 *                         (for measurement); 1: the split-K kernel for 8-bit codes too; default
 *                         (unset or any other value): the split-K kernel for 2- and 4-bit codes
 *                         where it applies (K a multiple of 32 up to 16384, x and w 16-byte
 *                         aligned; src/cuda/quantize_gemv.cu, src/cuda/quantize.c; read once).
 *   NUVEC_RANK, NUVEC_HOSTFILE  (or MLX's MLX_RANK, MLX_HOSTFILE) this process's rank and the
 *                         ring's JSON hostfile (src/distributed/ring.c); default: none (no ring).
 *   NUVEC_DIST_TIMEOUT    seconds before a silent distributed peer is lost; default 60.
 *   NUVEC_DIST_CONNECT_TIMEOUT  seconds the ring's setup retries connections; default 30.
 *   NUVEC_NCCL_DEVICE     the GPU of this rank's NCCL communicator; default LOCAL_RANK, else
 *                         the rank, modulo the GPU count.
 *   NUVEC_NCCL_LIBRARY    the path of libnccl; default libnccl.so.2 on the loader's path, then
 *                         the CUDA toolkit's.
 *   NUVEC_DISABLE_COMPILE set (not 0): compiled functions start disabled (nv_disable_compile);
 *                         default enabled (src/transforms/compile.c).
 *   NUVEC_CC              the C compiler of compile's generated kernels (a command, may hold
 *                         arguments); default cc. XDG_CACHE_HOME (default ~/.cache) holds
 *                         their cache, nuvec/ (src/transforms/fuse.c).
 *
 * Tests read NUVEC_TEST_SEED, NUVEC_TEST_FULL and NUVEC_TEST_THREAD_ITERS; the library does not.
 */
#include <stdlib.h>

#include "core/internal.h"

long nv__env_long(const char *name, long fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  char *end;
  long r = strtol(v, &end, 10);
  if (*end || r <= 0) return fallback;
  return r;
}
