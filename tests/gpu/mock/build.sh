#!/bin/bash
# Builds libredmock.so: the reduce family's kernels and kernel-table entries over the mock
# recording interface (mock_gpu.c), for check_reduce.py. Usage: build.sh [outdir]
# (default .carry/redmock, which the device tool can carry).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/.carry/redmock}
mkdir -p "$out"
inc=(-I"$root/src" -I"$root/include" -I/usr/local/cuda/include)
nvcc_flags=(-O2 -arch=sm_90 -Xcompiler=-fPIC,-Wall,-Wextra --expt-relaxed-constexpr ${NVCC_EXTRA:-})
for f in reduce reduce_rows; do
  nvcc "${nvcc_flags[@]}" "${inc[@]}" -c "$root/src/cuda/$f.cu" -o "$out/$f.o" &
done
cc -std=c11 -O2 -fPIC -Wall -Wextra -Werror -D_GNU_SOURCE "${inc[@]}" \
  -c "$root/src/cuda/reduce_host.c" -o "$out/reduce_host.o"
cc -std=c11 -O2 -fPIC -Wall -Wextra -Werror -D_GNU_SOURCE "${inc[@]}" \
  -c "$root/tests/gpu/mock/mock_gpu.c" -o "$out/mock_gpu.o"
wait
nvcc -shared -arch=sm_90 -o "$out/${LIBNAME:-libredmock.so}" "$out"/reduce.o "$out"/reduce_rows.o \
  "$out"/reduce_host.o "$out"/mock_gpu.o
echo "built $out/${LIBNAME:-libredmock.so}"
