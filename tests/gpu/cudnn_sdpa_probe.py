"""Diagnostics for cuDNN's fused attention (src/cuda/fast_sdpa_cudnn.c), one child process per
case so that a lost device in one case hides no other: each case of
tests/gpu/test_gpu_fast_sdpa_cudnn.py's cuDNN list, plus the bench row's shape (B 8, H 32,
L 4096, D 128, causal, bfloat16), runs under NUVEC_CUDNN_SDPA=1 and prints one line: the exit
status, nuvec's error or the largest difference from the CPU's result, and cuDNN's last log
lines (CUDNN_LOGLEVEL_DBG=2 in the child, its log in a file per case under the given folder),
and which graph, heuristics mode, configuration and engine cuDNN chose (nuvec's
NUVEC_LOG_FALLBACK=1 line "cuDNN runs ..."). With --sanitize, the first case that lost its
device (its process died, or nuvec reported "GPU work failed": a lost device, such as an
illegal address) runs again under compute-sanitizer.
  usage: python3 tests/gpu/cudnn_sdpa_probe.py OUTDIR [--sanitize] [name ...]"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_gpu_fast_sdpa_cudnn as t  # noqa: E402

BENCH = t.case("bench", (8, 32, 32, 4096, 4096, 128, 128), "bfloat16", "causal")
t.BY_NAME["bench"] = BENCH

CHILD = """
import sys, numpy as np
sys.path.insert(0, {here!r})
import test_gpu_fast_sdpa_cudnn as t
import cudnn_sdpa_probe as p
c = t.BY_NAME[{name!r}]
with t.Session() as nv:
    before = t.lib.nv_gpu_fallback_count()
    try:
        got = t.ref64(nv.read(t.attend(nv, c)))
    except t.NuvecError as e:
        print("ERROR", e.message.replace("\\n", " ")[:400]); sys.exit(0)
    fb = t.lib.nv_gpu_fallback_count() - before
if c["name"] == "bench":
    print("OK ran; fallbacks", fb, "finite", bool(np.isfinite(got).all())); sys.exit(0)
want = t.want_of(c)
ok = ~np.isnan(want)
err = float(np.abs(got[ok] - want[ok]).max()) if ok.any() else 0.0
vmax = float(np.abs(t.ref64(t.inputs(c)[2])).max())
tol = t.TOL[c["dtype"]] * max(vmax, 1.0)
print("OK" if err <= tol and fb == 0 else "WRONG", "max err %.3g tol %.3g fallbacks %d" % (err, tol, fb))
"""


def run_case(name, outdir, sanitize=False):
    log = os.path.join(outdir, f"cudnn_{name}.log")
    env = dict(os.environ, NUVEC_DEFAULT_DEVICE="gpu", NUVEC_LOG_FALLBACK="1",
               NUVEC_CUDNN_SDPA="1", CUDNN_LOGLEVEL_DBG="2", CUDNN_LOGDEST_DBG=log,
               NUVEC_TEST_SEED=str(t.SEED))
    cmd = [sys.executable, "-c", CHILD.format(here=HERE, name=name)]
    if sanitize:
        cmd = ["compute-sanitizer", "--tool", "memcheck", "--report-api-errors", "no",
               "--print-limit", "20"] + cmd
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = "timeout", "", ""
    last = (out.strip().splitlines() or [""])[-1]
    cud = ""
    if os.path.exists(log):
        lines = [l.strip() for l in open(log, errors="replace") if l.strip()]
        cud = " | ".join(lines[-4:])[-600:]
    tail = " ".join(err.strip().splitlines()[-3:])[-400:] if rc != 0 else ""
    chose = [l.split("cuDNN runs ", 1)[1] for l in err.splitlines() if "cuDNN runs " in l]
    return rc, last, cud, tail, out + err, chose


def lost_device(rc, last):
    """Whether the case lost its device: the child died, or nuvec failed its GPU work (an
    illegal address in cuDNN's kernels loses the device without killing the process)."""
    return rc != 0 or "GPU work failed" in last or "HRX_E_DEVICE_LOST" in last


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    sanitize = "--sanitize" in sys.argv
    names = [a for a in sys.argv[2:] if not a.startswith("--")]
    if not names:
        names = [c["name"] for c in t.CUDNN] + ["bench"]
    lost = None
    for n in names:
        rc, last, cud, tail, _, chose = run_case(n, outdir)
        print(f"PROBE {n}: rc={rc} {last} {('stderr: ' + tail) if tail else ''}"
              f"{(' engine: ' + '; '.join(chose)[-300:]) if chose else ''}"
              f"{(' cudnn: ' + cud) if cud and (rc != 0 or not last.startswith('OK')) else ''}",
              flush=True)
        if lost_device(rc, last) and lost is None:
            lost = n
    if sanitize and lost is not None:
        rc, last, cud, tail, text, _ = run_case(lost, outdir, sanitize=True)
        keep = [l for l in text.splitlines() if "=========" in l][:60]
        print(f"SANITIZE {lost}: rc={rc}")
        for l in keep:
            print("  " + l[:240])


if __name__ == "__main__":
    main()
