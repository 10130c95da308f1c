#!/bin/bash
# The copy and linalg families' kernels checked on a GPU without the real backend: harness.c
# runs each GPU kernel-table entry over mock_gpu.c (launches at once on one stream) on inputs
# evaluated by the CPU, compares with the CPU kernels (bit for bit for conversions, copies and
# creation; within float tolerance for products) and times the hot paths; torch_ref.py times
# PyTorch on the same operations. Build here, run on the GPU machine:
#   tests/gpu/mock_copy_linalg/run.sh build        (after `cmake --build build --target nuvec_static hrx_static`)
#   copy build/harness, run.sh, torch_ref.py and the lead's deps.tar.xz into the session repo's
#   .carry/<dir>, then on the device: bash .carry/<dir>/run.sh [perf|quick|memcheck] [torch]
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = build ]; then
  root=$(cd "$here/../../.." && pwd)
  gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I"$root/include" -I"$root/src" -I/usr/local/cuda/include \
    "$here/harness.c" "$here/mock_gpu.c" "$root/build/src/libnuvec.a" "$root/build/src/hrx/libhrx.a" \
    -L/usr/local/cuda/lib64 -lcudart -lcublasLt -lnvrtc -lopenblas -lminizip -lz -lm -lpthread -ldl \
    -o "$root/build/harness"
  exit $?
fi
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/deps && tar xJf "$here/../deps.tar.xz" -C /tmp/deps --strip-components=1 2>/dev/null
export LD_LIBRARY_PATH=/tmp/deps/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OPENBLAS_NUM_THREADS=8 PATH=$PATH:/usr/local/cuda/bin
case "${1:-perf}" in
  memcheck) compute-sanitizer --tool memcheck "$here/harness" quick 2>&1 | tee $OUT/memcheck.txt ;;
  *) "$here/harness" "${1:-perf}" 2>&1 | tee $OUT/harness.txt ;;
esac
if [ "${2:-}" = torch ]; then python3 "$here/torch_ref.py" 2>&1 | tee $OUT/torch.txt; fi
