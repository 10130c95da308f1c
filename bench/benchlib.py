"""Shared helpers for nuvec's side-by-side benchmarks.

A C benchmark binary prints one line per case, `BENCH <case> <seconds>` (the median of its
repeats). A family's Python driver (bench/bench_<family>.py) runs that binary, times the peers
(NumPy, MLX's CPU build where it installs, PyTorch where installed) on the same cases in the
same run, and prints one table through `report`, with ratios peer/nuvec (> 1: nuvec faster).

Fairness (bench/README.md): nuvec and every peer run in processes of their own, one after the
other, so no library's idle threads (PyTorch's OpenMP pool spins after each op, OpenBLAS's
workers spin before they sleep) share the cores another is timed on. A driver defines
`peer_times(peer, cases)` and calls `peer_results` from its main; `serve_peer` answers in the
peer's process. Drivers that time nuvec through its Python module (no C binary) run nuvec the
same way, as the process `--peer nuvec` (nuvec_module, peer_case_fns' nuvec_cases), so that the
driver's own process imports no library that keeps threads.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("NUVEC_BUILD", os.path.join(HERE, "..", "build"))


def median_time(fn, repeat=7, warmup=1, sync=None):
    """The median wall time of fn() over `repeat` runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_c(binary, *args):
    """Runs a C benchmark (path relative to the build's bench folder) and returns
    {case: seconds}."""
    path = binary if os.path.isabs(binary) else os.path.join(BUILD, "bench", binary)
    out = subprocess.run([path, *args], check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "BENCH":
            res[parts[1]] = float(parts[2])
    return res


PEER_FLAG = "--peer"


def peer_results(script, peers, cases=()):
    """Times each peer in a fresh Python process of `script` (`python3 script --peer NAME
    [case ...]`, answered by serve_peer), one after the other: {peer: {case: seconds}}. A peer
    that does not import, or whose process fails (its error is printed), gives {}."""
    out = {}
    for peer in peers:
        r = subprocess.run([sys.executable, script, PEER_FLAG, peer, *cases], capture_output=True,
                           text=True)
        out[peer] = {}
        if r.returncode != 0:
            print(f"{os.path.basename(script)}: peer {peer} failed:\n{r.stderr[-2000:]}",
                  file=sys.stderr)
            continue
        for line in r.stdout.splitlines():
            if line.startswith("PEER "):
                out[peer] = {k: v for k, v in json.loads(line[5:]).items() if v is not None}
    return out


def serve_peer(peer_times):
    """In a process started by peer_results: prints `PEER <json>` of peer_times(peer, cases)
    (None: the peer is absent) and returns True. Elsewhere returns False."""
    if len(sys.argv) < 3 or sys.argv[1] != PEER_FLAG:
        return False
    times = peer_times(sys.argv[2], sys.argv[3:]) or {}
    print("PEER " + json.dumps(times))
    return True


def torch_cpu():
    """torch with its intra-op pool on every core (the count nuvec's pool and OpenBLAS take by
    default), or None where PyTorch does not import."""
    torch = try_import("torch")
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
    return torch


def try_import(name):
    try:
        return __import__(name)
    except Exception:
        return None


def mlx_core():
    """mlx.core on the CPU, or None where MLX's CPU build does not install."""
    try:
        import mlx.core as mx

        mx.set_default_device(mx.cpu)
        return mx
    except Exception:
        return None


def nuvec_module():
    """nuvec's Python module from the build's python folder (with nuvec.fast loaded), for the
    process that times nuvec."""
    sys.path.insert(0, os.path.join(BUILD, "python"))
    import nuvec
    import nuvec.fast  # noqa: F401

    return nuvec


def peer_case_fns(peer, data, numpy_cases, mlx_cases, torch_cases, nuvec_cases=None):
    """One peer's {case: function} over `data` from the driver's case builders (NumPy's take the
    data, MLX's, PyTorch's and nuvec's the library first), or None where the peer's library does
    not import (or the driver has no builder for it)."""
    if peer == "nuvec":
        return nuvec_cases(nuvec_module(), *data) if nuvec_cases else None
    build = numpy_cases if peer == "numpy" else mlx_cases if peer == "mlx" else torch_cases
    if build is None:
        return None
    if peer == "numpy":
        return build(*data)
    lib = mlx_core() if peer == "mlx" else torch_cpu()
    if lib is None:
        return None
    return build(lib, *data)


def compare(script, title, cases, peers):
    """For a driver that times nuvec through its Python module: nuvec and each peer in a process
    of its own (peer_results with "nuvec" first), then one table of the cases nuvec ran, in
    `cases` order."""
    res = peer_results(script, ["nuvec"] + list(peers))
    nv = res.pop("nuvec")
    rows = [(k, nv[k], {p: t[k] for p, t in res.items() if k in t}) for k in cases if k in nv]
    report(title, rows, peers)


def report(title, rows, peers):
    """Prints a table: case, nuvec time, each peer's time and the ratio peer/nuvec.
    rows: [(case, nuvec_seconds, {peer: seconds or None})]."""
    print(f"\n== {title} ==")
    head = f"{'case':<34}{'nuvec':>11}" + "".join(f"{p:>11}{'ratio':>8}" for p in peers)
    print(head)
    for case, t, others in rows:
        line = f"{case:<34}{fmt(t):>11}"
        for p in peers:
            o = others.get(p)
            line += f"{fmt(o):>11}{(o / t if o and t else float('nan')):>8.2f}" if o else f"{'-':>11}{'-':>8}"
        print(line)
    sys.stdout.flush()


def fmt(t):
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f}us"
    if t < 1:
        return f"{t * 1e3:.2f}ms"
    return f"{t:.2f}s"
