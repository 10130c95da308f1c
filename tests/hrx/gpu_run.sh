#!/usr/bin/env bash
# Builds hrx on the lent GPU machine (standalone CMake: that machine has nvcc and CMake but not
# nuvec's Debian packages; Criterion and its libraries travel in .carry/), then runs the GPU
# tests, the trap test in its own process, compute-sanitizer memcheck and racecheck, and the
# bench. Logs go to $OUT; the last lines printed are a summary.
#   usage (device machine, repo root): bash tests/hrx/gpu_run.sh
set -u
OUT=${OUT:-/tmp/hrx-out}
mkdir -p "$OUT"
ROOT=$(pwd)
CARRY=$ROOT/.carry
B=/tmp/hrxgpu
SUM=$OUT/summary.txt
: >"$SUM"
note() { echo "$*" | tee -a "$SUM"; }

CSBIN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ nvidia-smi -L; nvcc --version | tail -2; gcc --version | head -1; $CSBIN --version | head -2; } >"$OUT/device.txt" 2>&1
note "device: $(head -1 "$OUT/device.txt")"

t0=$(date +%s)
cmake -S tests/hrx/standalone -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHRX_WERROR=OFF \
  -DCMAKE_LIBRARY_PATH="$CARRY/lib" -DCMAKE_C_FLAGS="-I$CARRY/include" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$CARRY/lib" >"$OUT/build.log" 2>&1 &&
  timeout 300 cmake --build $B -j16 >>"$OUT/build.log" 2>&1
rc=$?
note "build: rc=$rc in $(( $(date +%s) - t0 )) s"
if [ $rc != 0 ]; then tail -40 "$OUT/build.log"; exit 1; fi

export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
T=$B/tests/hrx
run() { # name timeout command...
  local name=$1 lim=$2; shift 2
  local s=$(date +%s)
  timeout "$lim" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc ($(( $(date +%s) - s )) s): $(grep -E 'Synthesis|passed|FAILED|skipped|trap:|threads:|header' "$OUT/$name.log" | tail -1)"
}
run test_hrx_cuda 240 $T/test_hrx_cuda --verbose
run test_hrx_gpu 240 $T/test_hrx_gpu --verbose
run test_hrx_trap 60 $T/test_hrx_trap
run test_hrx_host 120 $T/test_hrx_host
run test_hrx_threads 60 $T/test_hrx_threads
run test_hrx_header 30 $T/test_hrx_header
grep -h -E "trap:" "$OUT/test_hrx_trap.log" | tee -a "$SUM"

s=$(date +%s)
timeout 240 $B/bench/hrx/hrx_bench 1000 >"$OUT/bench.log" 2>&1
note "bench: rc=$? ($(( $(date +%s) - s )) s)"
timeout 120 $B/bench/hrx/hrx_bench 1000 >"$OUT/bench2.log" 2>&1
note "bench (second run, for spread): rc=$?"
grep -E "us/node|in place|instantiation|together|after another|round trip" "$OUT/bench2.log" | tee -a "$SUM"
cat "$OUT/bench.log" | tee -a "$SUM"
CS="$CSBIN --target-processes all --error-exitcode 3"
for run_ in memcheck:test_hrx_gpu memcheck:test_hrx_cuda racecheck:test_hrx_gpu; do
  tool=${run_%%:*} t=${run_#*:}
  {
    s=$(date +%s)
    # API errors are not reported: the negative tests provoke them on purpose (a missing
    # entry point, an invalid image), and memcheck would count them as errors.
    lc=""; [ $tool = memcheck ] && lc="--leak-check full"
    timeout 150 $CS --report-api-errors no $lc --tool $tool $T/$t --jobs 1 >"$OUT/cs_${tool}_$t.tmp" 2>&1
    rc=$?
    note "compute-sanitizer $tool $t: rc=$rc ($(( $(date +%s) - s )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis' "$OUT/cs_${tool}_$t.tmp" | sort | uniq -c | tr '\n' ';')"
  }
done
cat "$OUT"/cs_*.tmp >"$OUT/sanitizer.log" 2>/dev/null
rm -f "$OUT"/cs_*.tmp

# Keep at most 8 files in $OUT: fold the per-test logs into one.
for f in test_hrx_cuda test_hrx_gpu test_hrx_trap test_hrx_host test_hrx_threads test_hrx_header; do
  { echo "===== $f"; cat "$OUT/$f.log"; } >>"$OUT/tests.log"; rm -f "$OUT/$f.log"
done
