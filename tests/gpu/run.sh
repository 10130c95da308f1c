#!/usr/bin/env bash
# The GPU run (one call on the lent H200, within 10 minutes): builds nuvec there (the machine has
# nvcc, CMake and Python with PyTorch, not our Debian packages: OpenBLAS, LAPACKE, minizip,
# Criterion and their libraries travel in .carry/deps.tar.xz, made by tests/gpu/make_carry.sh),
# then runs
#   1. the whole C and pytest suite with the default device gpu (NUVEC_DEFAULT_DEVICE=gpu), so
#      every op is compared with NumPy on the GPU (ops without a kernel through the fallback);
#   2. the GPU tests (tests/gpu: semantics, kernels' own conformance files);
#   3. the fallback census: which primitives ran on the CPU during the suite;
#   4. compute-sanitizer memcheck over the GPU semantics tests;
#   5. the benchmarks beside PyTorch (bench/gpu);
#   6-11. the threads tests, charlm on both devices, the row-kernel and ops sweeps, ncu over
#      chosen bench cases, the per-evaluation cost profile;
#   12. cuDNN attention case by case;
#   13. the decode gemv's candidates (bench/gpu/qmv_sweep.cu);
#   14. rms_norm / layer_norm candidates (bench/gpu/norm_sweep.cu);
#   15. cuSOLVER's Cholesky called in place or transposed (bench/gpu/linalg_sweep.cu);
#   16. Nsight Systems' kernel summary of one bench case (NSYS_CASE);
#   17. the kernel timeline of bench cases (TRACE_CASES) through bench/gpu/kernel_trace.cpp
#   (stages 6-17 run only when named).
# Logs go to $OUT (at most 8 files); the last lines printed are the summary table.
#   usage (device machine, repo root): bash tests/gpu/run.sh [stages, default "1 2 3 4 5"]
# REUSE=1: a call right after one that built (the machine still warm) takes that build when the
# sources are the same; PREBUILT=1: binaries built here (tests/gpu/make_prebuilt.sh).
set -u
STAGES=${1:-"2 5 1 4"}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
ROOT=$(pwd)
SUM=$OUT/summary.txt
: >"$SUM"
note() { echo "$*" | tee -a "$SUM"; }
T0=$(date +%s)

tar xJf .carry/deps.tar.xz -C /tmp
D=/tmp/deps
export LD_LIBRARY_PATH="$D/lib:${LD_LIBRARY_PATH:-}"
export LIBRARY_PATH="$D/lib" CPATH="$D/include"
# The run-time libraries nuvec loads with dlopen (cuDNN, NCCL): PyTorch's wheels carry them.
for lib in cudnn nccl; do
  p=$(python3 -c "import os, nvidia.$lib as m; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null) &&
    [ -d "$p" ] && export LD_LIBRARY_PATH="$p:$LD_LIBRARY_PATH"
done
export NCCL_NVLS_ENABLE=0
{ nvidia-smi -L; nvcc --version | tail -2; python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'; } >"$OUT/device.txt" 2>&1
note "device: $(head -1 "$OUT/device.txt") | $(tail -1 "$OUT/device.txt")"

B=/tmp/nvb
t=$(date +%s)
if [ -n "${PREBUILT:-}" ]; then
  # Binaries built here beforehand (tests/gpu/make_prebuilt.sh), for the stages that need no
  # more than them (the profile, a bench subset); refused when the sources have changed since.
  mkdir -p $B && tar xJf .carry/prebuilt.tar.xz -C $B
  if [ "$(cat $B/STAMP)" != "$(bash tests/gpu/source_stamp.sh)" ]; then
    note "prebuilt: stale (the sources differ from the ones it was built from)"; exit 1
  fi
  note "prebuilt: unpacked in $(( $(date +%s) - t )) s"
elif [ -n "${REUSE:-}" ] && [ -f $B/CMakeCache.txt ] && [ "$(cat $B/STAMP 2>/dev/null)" = "$(bash tests/gpu/source_stamp.sh)" ]; then
  # The build an earlier call made on this (still warm) machine, from the same sources.
  note "build: reused from the last call"
else
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNUVEC_WERROR=OFF \
    -DCMAKE_LIBRARY_PATH="$D/lib" -DCMAKE_INCLUDE_PATH="$D/include" -DCBLAS_INCLUDE_DIR="$D/include" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$D/lib" -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$D/lib" \
    >"$OUT/build.log" 2>&1 && timeout 400 cmake --build $B -j16 ${BUILD_TARGETS:+--target $BUILD_TARGETS} >>"$OUT/build.log" 2>&1
  rc=$?
  [ $rc = 0 ] && bash tests/gpu/source_stamp.sh > $B/STAMP
  note "build: rc=$rc in $(( $(date +%s) - t )) s"
  if [ $rc != 0 ]; then grep -E "error|Error" "$OUT/build.log" | head -30; tail -20 "$OUT/build.log"; exit 1; fi
fi

export NUVEC_LIB=$B/src/libnuvec.so PYTHONDONTWRITEBYTECODE=1
# The smaller of $1 and the seconds left of BUDGET (at least 10).
left() { local l=$(( ${BUDGET:-570} - ($(date +%s) - T0) )); [ $l -lt 10 ] && l=10; [ $1 -lt $l ] && l=$1; echo $l; }
summ() { python3 tools/test_summary.py "$1" "$2" 2>/dev/null | tail -1; }

stage1() {
  # The C suites through CTest (the pytest entries aside) while tests/python runs in pytest-xdist
  # workers (one GPU context each); both with the default device gpu. A test whose GPU nodes ran
  # a CPU kernel fails (tests/python/conftest.py); NUVEC_LOG_FALLBACK=1 names the primitives.
  # The nuvec module's suite (python/tests) needs Python's headers, which this machine lacks.
  t=$(date +%s)
  local lim=$(left ${SUITE_TIME:-500})
  rm -rf $B/test-results && mkdir -p $B/test-results
  (cd $B && NUVEC_DEFAULT_DEVICE=gpu NUVEC_LOG_FALLBACK=1 NUVEC_TEST_THREAD_ITERS=200 timeout $lim ctest -j${SUITE_CJOBS:-6} --timeout 300 \
     --output-on-failure --output-junit ctest-junit.xml -E "^(pytest|pytest_module|distributed|test_gpu_semantics)$" >"$OUT/suite.log" 2>&1) &
  local cpid=$!
  NUVEC_DEFAULT_DEVICE=gpu NUVEC_LOG_FALLBACK=1 NUVEC_DEBUG_GUARDS=1 timeout $(( lim - 5 )) python3 -m pytest -q -p no:cacheprovider \
    -n ${SUITE_PYJOBS:-8} -rfE --junitxml=$B/test-results/pytest.xml ${SUITE_PY:-tests/python} >"$OUT/suite_py.log" 2>&1
  local prc=$?
  wait $cpid
  note "1. suite with default device gpu: $(summ $B/test-results $B/ctest-junit.xml) ($(( $(date +%s) - t )) s; pytest rc=$prc)"
  note "   pytest: $(tail -1 "$OUT/suite_py.log" | cut -c1-200)"
  grep -E "^FAILED|^ERROR|Failed  |\*\*\*Failed|Timeout" "$OUT/suite.log" "$OUT/suite_py.log" | sed 's/^[^:]*://' | cut -c1-240 | head -50 | tee -a "$SUM"
  nfb=$(grep -ho "nuvec: [a-z_0-9]* ran on the CPU\|[0-9]* GPU node(s) ran their CPU kernel" "$OUT/suite.log" "$OUT/suite_py.log" "$B"/Testing/Temporary/LastTest.log 2>/dev/null | wc -l)
  note "   fallbacks during the suite: $nfb ($( [ "$nfb" = 0 ] && echo "ok: none" || echo "FAIL: issue 16 wants 0")), by primitive:"
  grep -ho "nuvec: [a-z_0-9]* ran on the CPU" "$OUT/suite.log" "$OUT/suite_py.log" "$B"/Testing/Temporary/LastTest.log 2>/dev/null | awk '{print $2}' | sort | uniq -c | sort -rn | head -60 | tr '\n' ' ' | tee -a "$SUM"
  echo | tee -a "$SUM"
}

stage2() {
  t=$(date +%s)
  timeout 60 $B/tests/gpu/test_gpu_semantics --verbose >"$OUT/gpu_tests.log" 2>&1
  note "2a. GPU semantics: rc=$? $(grep -E 'Synthesis' "$OUT/gpu_tests.log" | tail -1)"
  grep -E "\[FAIL\]|Assertion|signal" "$OUT/gpu_tests.log" | head -20 | tee -a "$SUM"
  timeout 60 $B/tests/gpu/test_gpu_dist_order --verbose >"$OUT/gpu_dist_order.log" 2>&1
  note "2b. GPU collectives' order (fake communicator): rc=$? $(grep -E 'Synthesis' "$OUT/gpu_dist_order.log" | tail -1)"
  for x in test_hrx_gpu test_hrx_cuda; do
    [ -x $B/tests/hrx/$x ] || continue
    timeout 60 $B/tests/hrx/$x >"$OUT/hrx.log" 2>&1
    note "2c. $x: rc=$? $(grep -E 'Synthesis' "$OUT/hrx.log" | tail -1)"
    grep -E "\[FAIL\]|Assertion|signal" "$OUT/hrx.log" | head -10 | tee -a "$SUM"
  done
  if [ -z "${SKIP_GPU_PYTEST:-}" ]; then
    # One process per file, four at a time: a device lost in one file (a sticky CUDA error ends
    # its process's context) cannot fail the files after it.
    P=/tmp/gpu-pytest; rm -rf $P; mkdir -p $P
    ls ${GPU_PYTEST:-tests/gpu/test_*.py} | NUVEC_DEFAULT_DEVICE=gpu timeout 240 xargs -P 4 -I{} \
      sh -c 'python3 -m pytest -q -p no:cacheprovider {} > '$P'/$(basename {} .py).log 2>&1; echo "$? {}" >> '$P'/rc'
    for f in $P/*.log; do echo "== $(basename $f)"; cat $f; done >>"$OUT/gpu_tests.log"
    note "2b. tests/gpu pytest, per file: $(python3 - "$P" <<'PY'
import re, sys, pathlib
tot = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.log")):
    last = (f.read_text().strip().splitlines() or [""])[-1]
    for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last):
        tot[k] = tot.get(k, 0) + int(n)
    if not re.search(r"\d+ passed", last) or "failed" in last or "error" in last:
        print(f.stem, "->", last[-100:], file=sys.stderr)
print(", ".join(f"{v} {k}" for k, v in sorted(tot.items())))
PY
)"
    grep -v "^0 " $P/rc | sed 's/^/   rc /' | tee -a "$SUM"
    grep -hE "^FAILED" $P/*.log | sed 's/ - .*//' | head -30 | tee -a "$SUM"
    grep -hE "^E .*(Error|error)" $P/*.log | sort | uniq -c | sort -rn | head -12 | cut -c1-220 | tee -a "$SUM"
  fi
  note "   ($(( $(date +%s) - t )) s)"
}

stage3() {
  t=$(date +%s)
  NUVEC_DEFAULT_DEVICE=gpu NUVEC_LOG_FALLBACK=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python \
    >"$OUT/fallback.log" 2>&1
  note "3. fallback census (pytest tests/python on gpu): $(grep -c 'ran on the CPU' "$OUT/fallback.log") CPU runs; by primitive:"
  grep -o "nuvec: [a-z_0-9]* ran on the CPU" "$OUT/fallback.log" | awk '{print $2}' | sort | uniq -c | sort -rn | head -60 | tr '\n' ' ' | tee -a "$SUM"
  echo | tee -a "$SUM"
}

stage4() {
  t=$(date +%s)
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  timeout 60 $CS --tool memcheck --error-exitcode 3 --report-api-errors no $B/tests/gpu/test_gpu_semantics --jobs 1 \
    >"$OUT/sanitizer.log" 2>&1
  note "4. compute-sanitizer memcheck test_gpu_semantics: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1) ($(( $(date +%s) - t )) s)"
  # The indexing, scatter and sort kernels under memcheck (their GPU test files, sampled).
  t=$(date +%s)
  NUVEC_DEFAULT_DEVICE=gpu NUVEC_TEST_SAMPLE_SCALE=0.04 timeout $(left ${MEMCHECK_TIME:-150}) $CS --tool memcheck --error-exitcode 3 --report-api-errors no \
    python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gpu_gather.py tests/gpu/test_gpu_scatter.py tests/gpu/test_gpu_sort.py tests/gpu/test_gpu_scan.py tests/gpu/test_gpu_conv.py tests/gpu/test_gpu_fft.py tests/gpu/test_gpu_fast_norm.py tests/gpu/test_gpu_fast_sdpa.py tests/gpu/test_gpu_fast_serving.py tests/gpu/test_gpu_fast_paged.py tests/gpu/test_gpu_fast_state.py \
    -k "${MEMCHECK_K:-out_of_range or large or duplicates or one_long_row or topk or masked or embedding or rows or columns or as_strided or sdpa_layouts or sdpa_edges or decode_vec_nan or causal_softmax_edges or sorted_offsets_extremes or conv_slots_extremes or paged_write_out_of_range or bad_tables_fail or decode_unaligned or norm_rope_extremes or gated_delta_slots_extremes}" \
    >"$OUT/sanitizer_py.log" 2>&1
  note "4b. memcheck over the index/scatter/sort tests: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_py.log" | tail -1) $(grep -E 'passed|failed' "$OUT/sanitizer_py.log" | tail -1) ($(( $(date +%s) - t )) s)"
  grep -E "Invalid|out of bounds" "$OUT/sanitizer_py.log" | head -5 | tee -a "$SUM"
}

stage6() {
  t=$(date +%s)
  for x in test_threads test_threads_transforms; do
    NUVEC_DEFAULT_DEVICE=gpu NUVEC_TEST_THREAD_ITERS=300 timeout 60 $B/tests/c/$x >"$OUT/threads.log" 2>&1
    note "6. $x on the GPU: rc=$? $(tail -1 "$OUT/threads.log")"
  done
  NUVEC_DEFAULT_DEVICE=gpu timeout 100 python3 -m pytest -q -p no:cacheprovider tests/python >>"$OUT/gpu_tests.log" 2>&1
  note "6b. tests/python on the GPU: rc=$? $(tail -1 "$OUT/gpu_tests.log") ($(( $(date +%s) - t )) s)"
  grep -E "^FAILED" "$OUT/gpu_tests.log" | head -20 | tee -a "$SUM"
}

stage5() {
  t=$(date +%s)
  NUVEC_BUILD=$B timeout $(left 200) bash bench/gpu/run.sh ${BENCH_FILTER:-} >"$OUT/bench.log" 2>&1
  note "5. bench: rc=$? ($(( $(date +%s) - t )) s)"
  grep -E "^DIAG|rc=" "$OUT/bench.log" | tee -a "$SUM"
  sed -n '/^=== table/,$p' "$OUT/bench.log" | tee -a "$SUM"
}
stage7() {
  # charlm: the same seed on both devices must give the same loss curve (float tolerance).
  t=$(date +%s)
  for dev in cpu gpu; do
    rm -rf /tmp/charlm_$dev
    timeout 90 $B/examples/charlm --steps ${CHARLM_STEPS:-40} --seed 7 --device $dev --out /tmp/charlm_$dev \
      --sample-chars 0 --eval-every 0 >"$OUT/charlm_$dev.log" 2>&1
    note "7. charlm --device $dev: rc=$? $(grep -E '^trained' "$OUT/charlm_$dev.log" | tail -1)"
  done
  python3 - <<'PY' 2>&1 | tee -a "$SUM"
import csv
def load(d):
    return {int(r["step"]): float(r["train_loss"]) for r in csv.DictReader(open(f"/tmp/charlm_{d}/loss.csv")) if r["train_loss"]}
c, g = load("cpu"), load("gpu")
steps = sorted(set(c) & set(g))
worst = max((abs(c[s] - g[s]) / max(abs(c[s]), 1e-6), s) for s in steps)
print(f"7. charlm loss curves: {len(steps)} steps compared; first {c[steps[0]]:.5f} (cpu) {g[steps[0]]:.5f} (gpu); "
      f"last {c[steps[-1]]:.5f} (cpu) {g[steps[-1]]:.5f} (gpu); worst relative difference {worst[0]:.2e} at step {worst[1]}")
PY
  note "   ($(( $(date +%s) - t )) s)"
}

stage8() {
  # The softmax row kernel's candidates (bench/gpu/rows_sweep.cu), best per shape.
  t=$(date +%s)
  timeout 120 $B/bench/gpu/rows_sweep >"$OUT/rows_sweep.log" 2>&1
  note "8. rows_sweep: rc=$? ($(( $(date +%s) - t )) s)"
  grep -E "^BEST|FAIL" "$OUT/rows_sweep.log" | head -30 | tee -a "$SUM"
}

stage9() {
  # Nsight Compute over bench cases (NCU_CASES: bench_gpu filters): the kernels they ran, with
  # their durations and memory throughput (the clocks left alone).
  for c in ${NCU_CASES:-ops_add_transposed ops_cumsum_axis2}; do
    secs=""; for x in ${NCU_SECTIONS:-SpeedOfLight}; do secs="$secs --section $x"; done
    timeout ${NCU_TIME:-120} ncu --clock-control none -k regex:"${NCU_KERNELS:-k_tile|k_row|k_strided|k_contig}" \
      -c ${NCU_COUNT:-4} $secs $B/bench/gpu/bench_gpu $c >"$OUT/ncu_$c.log" 2>&1
    note "9. ncu $c: rc=$?"
    grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Local Memory|Bank Conflict" \
      "$OUT/ncu_$c.log" | sed -E 's/\(const .*//' | head -${NCU_LINES:-16} | tee -a "$SUM"
  done
}

stage10() {
  # The scan and transposed-add candidates (bench/gpu/ops_sweep.cu), best per case.
  timeout 120 $B/bench/gpu/ops_sweep ${SWEEP_FILTER:-} >"$OUT/ops_sweep.log" 2>&1
  note "10. ops_sweep: rc=$?"
  grep -E "^SWEEP|^BEST|FAIL" "$OUT/ops_sweep.log" | head -60 | tee -a "$SUM"
}

stage11() {
  # Where one evaluation's time goes: hrx's round trip against raw CUDA (hrx_bench), nuvec's
  # host phases per case (NUVEC_GPU_PROFILE=1), and an Nsight Systems API summary where nsys is.
  t=$(date +%s)
  note "11. tools: $(for x in nsys perf gdb; do command -v $x >/dev/null && echo -n "$x "; done)"
  timeout 90 $B/bench/hrx/hrx_bench ${HRX_NODES:-200} >"$OUT/hrx_bench.log" 2>&1
  note "11a. hrx_bench: rc=$?"
  grep -E "round trip|replay|stream launches|update in place, us |prepare" "$OUT/hrx_bench.log" | tee -a "$SUM"
  NUVEC_GPU_PROFILE=1 timeout 120 $B/bench/gpu/bench_gpu "${PROF_CASES:-eval_roundtrip|qmm_decode|sdpa_decode}" >"$OUT/prof.log" 2>&1
  note "11b. profiled bench: rc=$?"
  grep -E "^BENCH|^DIAG" "$OUT/prof.log" | grep -v "inputs" | cut -c1-400 | tee -a "$SUM"
  # Measurement switches (AB_SETS: VAR=value settings, one run each; HRX_WAIT_HELP, the waiters'
  # help to the watchers, HRX_WATCH_SPIN_US, NUVEC_QMV_TC), the same cases unprofiled.
  for set in ${AB_SETS:-HRX_WAIT_HELP=0 HRX_WAIT_HELP=1}; do
    env $set timeout 60 $B/bench/hrx/hrx_bench 50 2>&1 | grep -E "round trip|of which" | sed "s/^/$set /" | tee -a "$SUM"
    env $set timeout 60 $B/bench/gpu/bench_gpu "${AB_CASES:-eval_roundtrip|qmm_decode|sdpa_decode}" 2>&1 | grep -E "^BENCH" | sed "s/^/$set /" | tee -a "$SUM"
  done
  if command -v nsys >/dev/null; then
    timeout 120 nsys profile -t cuda,osrt -s none --cpuctxsw=none --cuda-graph-trace=node -o /tmp/nvprof -f true \
      $B/bench/gpu/bench_gpu "${NSYS_CASE:-eval_roundtrip}" >"$OUT/nsys.log" 2>&1
    timeout 90 nsys stats -r cuda_api_sum,cuda_gpu_kern_sum,osrt_sum /tmp/nvprof.nsys-rep >>"$OUT/nsys.log" 2>&1
    note "11c. nsys: rc=$?"
    grep -E "^ +[0-9.]+ +[0-9]+ +[0-9]+ " "$OUT/nsys.log" | head -${NSYS_LINES:-30} | cut -c1-200 | tee -a "$SUM"
  fi
  note "   ($(( $(date +%s) - t )) s)"
}

stage12() {
  # cuDNN's fused attention, case by case (tests/gpu/cudnn_sdpa_probe.py: one child each, cuDNN's
  # warnings logged; the first lost case again under compute-sanitizer).
  t=$(date +%s)
  rm -rf /tmp/cudnn_probe
  PATH=$PATH:/usr/local/cuda/bin timeout $(left ${PROBE_TIME:-240}) python3 tests/gpu/cudnn_sdpa_probe.py /tmp/cudnn_probe ${PROBE_ARGS:---sanitize} \
    >"$OUT/cudnn_probe.log" 2>&1
  note "12. cuDNN attention probe: rc=$? ($(( $(date +%s) - t )) s)"
  grep -E "^PROBE|^SANITIZE|^  " "$OUT/cudnn_probe.log" | cut -c1-700 | head -80 | tee -a "$SUM"
  tar czf "$OUT/cudnn_logs.tgz" -C /tmp cudnn_probe 2>/dev/null
}

stage13() {
  # The quantized decode gemv's candidates (bench/gpu/qmv_sweep.cu): lib and new designs per
  # shape against a copy of the same bytes, best per shape.
  t=$(date +%s)
  timeout 120 $B/bench/gpu/qmv_sweep >"$OUT/qmv_sweep.log" 2>&1
  note "13. qmv_sweep: rc=$? ($(( $(date +%s) - t )) s)"
  { grep -E "^BEST|FAIL|^device|^qmv_sweep" "$OUT/qmv_sweep.log"; grep -E "^SWEEP" "$OUT/qmv_sweep.log"
    grep -E "^KINFO" "$OUT/qmv_sweep.log"; } | head -260 | tee -a "$SUM"
}

stage14() {
  # rms_norm / layer_norm candidates (bench/gpu/norm_sweep.cu): the library's k_norm in its plan
  # and in other launch shapes and cache hints, lean variants, against a copy of the same bytes.
  t=$(date +%s)
  timeout 120 $B/bench/gpu/norm_sweep ${NORM_FILTER:-} >"$OUT/norm_sweep.log" 2>&1
  note "14. norm_sweep: rc=$? ($(( $(date +%s) - t )) s)"
  { grep -E "^BEST|FAIL|^device|^norm_sweep|CUDA|cuda" "$OUT/norm_sweep.log"; grep -E "^SWEEP" "$OUT/norm_sweep.log"
    grep -E "^KINFO" "$OUT/norm_sweep.log" | grep -E "bf16_32768x4096"; } | head -400 | tee -a "$SUM"
}

stage15() {
  # cuSOLVER's Cholesky called nuvec's way and the transposed way (bench/gpu/linalg_sweep.cu).
  t=$(date +%s)
  timeout 120 $B/bench/gpu/linalg_sweep ${LINALG_SIZES:-} >"$OUT/linalg_sweep.log" 2>&1
  note "15. linalg_sweep: rc=$? ($(( $(date +%s) - t )) s)"
  grep -E "^SWEEP|^BEST|linalg_sweep:" "$OUT/linalg_sweep.log" | head -40 | tee -a "$SUM"
}

stage16() {
  # One bench case's kernels and their times (NSYS_CASE, a bench_gpu filter; one warm-up and one
  # timed run of each selected case): Nsight Systems' kernel summary where nsys is, CUDA graphs
  # traced node by node, else Nsight Compute's per-kernel summary (each kernel's duration alone, one
  # replay pass a kernel).
  t=$(date +%s)
  local nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/*/bin/nsys 2>/dev/null | head -1)
  if [ -n "$nsys" ]; then
    NUVEC_BENCH_ONCE=1 timeout ${NSYS_TIME:-150} $nsys profile -t cuda -s none --cpuctxsw=none --cuda-graph-trace=node \
      -o /tmp/nvprof16 -f true $B/bench/gpu/bench_gpu "${NSYS_CASE:-mlp_train}" >"$OUT/nsys16.log" 2>&1
    note "16. nsys ${NSYS_CASE:-mlp_train}: rc=$? ($(( $(date +%s) - t )) s)"
    timeout 90 $nsys stats -r cuda_gpu_kern_sum /tmp/nvprof16.nsys-rep >>"$OUT/nsys16.log" 2>&1
    grep -E "^ +[0-9.]+ +[0-9]+ +[0-9]+ " "$OUT/nsys16.log" | head -${NSYS_LINES:-40} | cut -c1-220 | tee -a "$SUM"
  else
    NUVEC_BENCH_ONCE=1 timeout ${NSYS_TIME:-200} ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      $B/bench/gpu/bench_gpu "${NSYS_CASE:-mlp_train}" >"$OUT/nsys16.log" 2>&1
    note "16. ncu summary ${NSYS_CASE:-mlp_train}: rc=$? ($(( $(date +%s) - t )) s)"
    python3 - "$OUT/nsys16.log" <<'PY' | tee -a "$SUM"
import re, sys
# ncu's per-kernel summary: a kernel's name line, then its sections' metrics (average, min, max).
rows, name, calls = [], None, 0
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^  (\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m:
        name = m.group(1)[:90]; continue
    m = re.match(r"^\s+Invocations\s+(\d+)", line) or re.search(r"Invocations: (\d+)", line)
    if m and name: calls = int(m.group(1))
    m = re.match(r"^\s+(?:Duration|gpu__time_duration.sum)\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        unit, v = m.group(1), float(m.group(2).replace(",", ""))
        us = v / 1000 if unit in ("nsecond", "ns") else v * 1000 if unit in ("msecond", "ms") else v
        us = us * 1e6 if unit in ("second", "s") else us
        rows.append((us * max(calls, 1), us, max(calls, 1), name)); name = None; calls = 0
rows.sort(reverse=True)
print("   total_us  avg_us  calls  kernel")
for tot, us, c, n in rows[:40]:
    print(f"   {tot:9.1f} {us:7.1f} {c:6d}  {n}")
print(f"   all kernels: {sum(r[0] for r in rows):.1f} us over {sum(r[2] for r in rows)} launches")
PY
    grep -E "==ERROR|==WARNING" "$OUT/nsys16.log" | head -5 | tee -a "$SUM"
  fi
}

stage17() {
  # The kernel timeline of chosen bench cases (TRACE_CASES: a bench_gpu filter, cases joined by
  # '|'; one warm-up and one timed run each): bench/gpu/kernel_trace.cpp preloaded, CUPTI's
  # records of each timed run grouped by kernel, with the span and the GPU's busy time.
  t=$(date +%s)
  local lib=$(find $B -name libkernel_trace.so | head -1)
  local sp=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  local cup=$(find /usr/local/cuda* $sp -name 'libcupti.so*' 2>/dev/null | head -1)
  if [ -z "$lib" ] || [ -z "$cup" ]; then note "17. kernel trace: no tracer ($lib) or no libcupti ($cup)"; return; fi
  NUVEC_BENCH_ONCE=${TRACE_WARM:-3} NUVEC_GPU_PROFILE=${TRACE_PROFILE:-0} LD_LIBRARY_PATH="$(dirname $cup):$LD_LIBRARY_PATH" LD_PRELOAD=$lib KTRACE_OUT=/tmp/ktrace.txt \
    KTRACE_TOP=${TRACE_LINES:-25} timeout $(left 200) $B/bench/gpu/bench_gpu "${TRACE_CASES:-mlp_train}" >"$OUT/ktrace.log" 2>&1
  note "17. kernel trace ${TRACE_CASES:-mlp_train}: rc=$? ($(( $(date +%s) - t )) s)"
  grep -E "^BENCH|^DIAG" "$OUT/ktrace.log" | grep -v -E "warm-up|DIAG inputs" | tee -a "$SUM"
  sed 's/^KTRACE //' /tmp/ktrace.txt | cut -c1-200 | tee -a "$SUM"
}

finish() {
  note "total: $(( $(date +%s) - T0 )) s"
  # At most 8 files come back: the logs travel as one archive beside the summary.
  (cd "$OUT" && tar czf logs.tgz --exclude=summary.txt --exclude=logs.tgz -- * 2>/dev/null &&
    find . -maxdepth 1 -type f ! -name summary.txt ! -name logs.tgz -delete)
}
# BUDGET (seconds, default 570): a stage starts only while the run is within it, so that the
# call's 600 s limit never cuts the archive step.
for st in $STAGES; do
  if [ $(( $(date +%s) - T0 )) -ge ${BUDGET:-570} ]; then note "stage $st skipped: past the budget"; continue; fi
  stage$st
done
finish
