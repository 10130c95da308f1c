#!/usr/bin/env bash
# Packs binaries built here (build/, with nvcc for sm_90) into .carry/prebuilt.tar.xz, so that a
# GPU call that only benchmarks or profiles skips the ~2 minutes of building there:
# `PREBUILT=1 bash tests/gpu/run.sh 11`. The archive carries a stamp of the sources it was built
# from; run.sh refuses it for a tree whose sources differ.
#   usage: bash tests/gpu/make_prebuilt.sh [targets, default "bench_gpu hrx_bench qmv_sweep"]
# A target may also be a file under build/ (src/libnuvec.so.0: the library the ctypes tests load,
# packed as src/libnuvec.so). The binaries share most of their bytes, so xz works with a window
# that spans several of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGETS=${1:-"bench_gpu hrx_bench qmv_sweep"}
cmake --build build -j2 --target $(for t in $TARGETS; do case $t in */*) echo nuvec_shared ;; *) echo $t ;; esac; done) >/dev/null
W=$(mktemp -d)
for t in $TARGETS; do
  case $t in
    */*) f=build/$t ;;
    *) f=$(find build -type f \( -name "$t" -o -name "lib$t.so" \) -perm -u+x | head -1) ;;
  esac
  [ -n "$f" ] || { echo "no binary for $t" >&2; exit 1; }
  mkdir -p "$W/$(dirname "${f#build/}")"
  strip --strip-debug -o "$W/${f#build/}" "$f"
done
[ -e "$W/src/libnuvec.so.0" ] && mv "$W/src/libnuvec.so.0" "$W/src/libnuvec.so"
bash tests/gpu/source_stamp.sh > "$W/STAMP"
mkdir -p .carry && tar cf - -C "$W" . | xz -T1 --lzma2=preset=2,dict=384MiB > .carry/prebuilt.tar.xz
rm -rf "$W"
ls -la .carry/prebuilt.tar.xz
