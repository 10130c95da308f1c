"""all_sum of float32 across local ranks (issue 21's bench): nuvec's ring over TCP loopback,
nuvec's MPI backend and a raw MPI_Allreduce (OpenMPI over TCP, --mca btl tcp,self), with 2 and
4 ranks at 256 KiB, 4 MiB and 64 MiB, in bus bandwidth (2 (n-1)/n bytes per second, as
nccl-tests report it; BASELINES.md's OpenMPI figures for 2 ranks: 2.5 / 2.5 / 1.15 GB/s), plus
the time the other ranks take to report a killed peer. The MPI rows are skipped where OpenMPI
is not installed. Each configuration is one nuvec-launch (or mpirun) job whose rank 0 prints
`BENCH <case> <seconds>` (the median over repeats, after a barrier per repeat).

    python3 bench/bench_distributed.py [--runs K] [--ranks 2,4] [--no-detect]

--runs K (default 3) runs every job K times, interleaved (ring, MPI backend, raw MPI, then
again), and keeps each case's best median, so that a busy moment on a shared machine costs
every peer alike; the load average is printed before and after."""
import ctypes as C
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
LAUNCH = os.path.join(ROOT, "tools", "nuvec-launch")
BUILD = os.environ.get("NUVEC_BUILD", os.path.join(ROOT, "build"))
LIB = os.path.join(BUILD, "src", "libnuvec.so")
SIZES = [256 << 10, 4 << 20, 64 << 20]


def rank_main(mode):
    """One rank: times all_sum of each size (nuvec) or MPI_Allreduce (raw)."""
    import numpy as np
    import statistics

    reps = {256 << 10: 30, 4 << 20: 10, 64 << 20: 4}
    if mode == "raw":
        mpi = C.CDLL("libmpi.so.40", mode=C.RTLD_GLOBAL)
        mpi.MPI_Init(None, None)
        world = C.c_void_p.in_dll(mpi, "ompi_mpi_comm_world")
        comm = C.addressof(world)
        rank = C.c_int()
        mpi.MPI_Comm_rank(C.c_void_p(comm), C.byref(rank))
        fl = C.addressof(C.c_void_p.in_dll(mpi, "ompi_mpi_float"))
        op = C.addressof(C.c_void_p.in_dll(mpi, "ompi_mpi_op_sum"))
        for size in SIZES:
            buf = np.ones(size // 4, np.float32)
            out = np.zeros_like(buf)
            # In place (MPI_IN_PLACE, 1 in OpenMPI), and into another buffer as nuvec's all_sum
            # (whose input stays): the MPI backend's cost is measured against the second.
            for case, src in (("raw", C.c_void_p(1)), ("rawo", buf.ctypes.data_as(C.c_void_p))):
                dst = (buf if case == "raw" else out).ctypes.data_as(C.c_void_p)
                ts = []
                for _ in range(reps[size] + 1):
                    mpi.MPI_Barrier(C.c_void_p(comm))
                    t = time.perf_counter()
                    mpi.MPI_Allreduce(src, dst, buf.size, C.c_void_p(fl), C.c_void_p(op),
                                      C.c_void_p(comm))
                    ts.append(time.perf_counter() - t)
                if rank.value == 0:
                    print(f"BENCH {case}_{size} {statistics.median(ts[1:])}", flush=True)
        mpi.MPI_Finalize()
        return
    sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))
    import worker as w  # the ctypes signatures

    g = w.init()
    rank, _ = w.rank_size(g)
    w.sig("nv_array_from_data", C.c_void_p, C.c_void_p, C.POINTER(C.c_int), C.c_int, C.c_int)
    w.sig("nv_eval1", C.c_int, C.c_void_p)
    w.sig("nv_release", None, C.c_void_p)
    one = np.ones(1, np.float32)
    shape1 = (C.c_int * 1)(1)
    for size in SIZES:
        buf = np.ones(size // 4, np.float32)
        shape = (C.c_int * 1)(buf.size)
        ts = []
        for _ in range(reps[size] + 1):
            bar = w.lib.nv_dist_all_sum(w.lib.nv_array_from_data(one.ctypes.data, shape1, 1, 11), g)
            assert w.lib.nv_eval1(bar) == 0
            x = w.lib.nv_array_from_data(buf.ctypes.data, shape, 1, 11)
            t = time.perf_counter()
            y = w.lib.nv_dist_all_sum(x, g)
            assert w.lib.nv_eval1(y) == 0, w.lib.nv_last_error()
            ts.append(time.perf_counter() - t)
            for h in (bar, x, y):
                w.lib.nv_release(h)
        if rank == 0:
            print(f"BENCH {mode}_{size} {statistics.median(ts[1:])}", flush=True)


def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600).stdout
    res = {}
    for line in out.splitlines():
        parts = line.replace("[0] ", "").replace("[1,0]<stdout>:", "").split()
        if len(parts) == 3 and parts[0] == "BENCH":
            res[parts[1]] = float(parts[2])
    return res


def detect_time(how):
    """Seconds until rank 0 reports the loss of rank 2 (of 3), killed or stopped."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))
    import test_ring

    procs, _, _ = test_ring.start_ranks(3, "lost-" + how, NUVEC_DIST_TIMEOUT="1",
                                        NUVEC_LIB=LIB)
    out, _ = procs[0].communicate(timeout=60)
    for p in procs[1:]:
        p.kill()
        p.wait()
    for line in out.splitlines():
        if "lost peer detected after" in line:
            return float(line.split("after ")[1].split(" s")[0])
    return float("nan")


def best_of(acc, res):
    """Keeps the shortest time per case over runs."""
    for k, v in res.items():
        acc[k] = min(v, acc.get(k, v))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--rank":
        return rank_main(sys.argv[2])
    import argparse

    ap = argparse.ArgumentParser(description="all_sum bus bandwidth: ring vs MPI")
    ap.add_argument("--runs", type=int, default=3, help="runs per job; the best median is kept")
    ap.add_argument("--ranks", default="2,4", help="comma-separated group sizes")
    ap.add_argument("--peers", default="ring,mpi,raw", help="which of ring, mpi, raw to run")
    ap.add_argument("--no-detect", action="store_true", help="skip the lost-peer timings")
    opts = ap.parse_args()
    env = dict(os.environ, NUVEC_LIB=LIB)
    have_mpi = shutil.which("mpirun") is not None
    peers = opts.peers.split(",")
    mpirun = ["mpirun", "--oversubscribe", "--mca", "btl", "tcp,self", "-x", "NUVEC_LIB"]
    if os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")
    load0 = os.getloadavg()
    rows = []
    for n in [int(v) for v in opts.ranks.split(",")]:
        ring, mpi, raw = {}, {}, {}
        for _ in range(max(1, opts.runs)):
            if "ring" in peers:
                best_of(ring, run([sys.executable, LAUNCH, "-n", str(n), __file__, "--rank",
                                   "ring"], env))
            if have_mpi and "mpi" in peers:
                best_of(mpi, run([sys.executable, LAUNCH, "--backend", "mpi", "-n", str(n),
                                  "--env", "NUVEC_LIB=" + LIB, __file__, "--rank", "mpi"], env))
            if have_mpi and "raw" in peers:
                best_of(raw, run(mpirun + ["-np", str(n), sys.executable, __file__, "--rank",
                                           "raw"], env))
        for size in SIZES:
            bus = lambda t: 2 * (n - 1) / n * size / t / 1e9 if t else float("nan")  # noqa: E731
            r = ring.get(f"ring_{size}")
            m = mpi.get(f"mpi_{size}")
            w = raw.get(f"raw_{size}")
            wo = raw.get(f"rawo_{size}")
            rows.append((n, size, r and bus(r), m and bus(m), w and bus(w), wo and bus(wo),
                         r and w and w / r, m and wo and m / wo))
    load1 = os.getloadavg()
    print(f"{'ranks':>5} {'size':>9} {'ring GB/s':>10} {'nuvec-mpi':>10} {'raw MPI':>10} "
          f"{'raw 2 buf':>10} {'ring/raw':>9} {'mpi cost':>9}")
    for n, size, r, m, w, wo, ratio, cost in rows:
        f = lambda v: f"{v:10.2f}" if v else f"{'-':>10}"  # noqa: E731
        print(f"{n:>5} {size >> 10:>7}Ki {f(r)} {f(m)} {f(w)} {f(wo)} "
              f"{(f'{ratio:9.2f}' if ratio else '-'):>9} "
              f"{(f'{100 * (cost - 1):+8.1f}%' if cost else '-'):>9}")
    print("raw MPI: MPI_Allreduce in place; raw 2 buf: from one buffer into another, as all_sum "
          "(mpi cost: nuvec-mpi's time over it)")
    print(f"best of {opts.runs} runs each; load average {load0[0]:.2f} before, "
          f"{load1[0]:.2f} after (1 min)")
    if not opts.no_detect:
        print(f"killed peer reported after {detect_time('kill'):.3f} s; stopped peer after "
              f"{detect_time('stop'):.3f} s (NUVEC_DIST_TIMEOUT=1)")


if __name__ == "__main__":
    main()
