"""One rank of a multi-process distributed test (tests/distributed/test_ring.py starts them,
directly or through tools/nuvec-launch). It reaches libnuvec through ctypes (tests/python/nvc.py),
joins the job from the environment (NUVEC_RANK / NUVEC_HOSTFILE or MLX_*), runs the scenario
named on its command line, and exits 0 when every check passed (an AssertionError's traceback
and a non-zero status otherwise). Every rank derives every rank's inputs from the same seeds, so
each can compute the NumPy reference of a collective by itself."""
import ctypes as C
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import nvc  # noqa: E402
from nvc import B, I, IP, P, sig  # noqa: E402

G = C.c_int64
sig("nv_dist_init", I, C.c_char_p, B, C.POINTER(G))
sig("nv_group_rank", I, G, IP)
sig("nv_group_size", I, G, IP)
sig("nv_group_split", I, G, I, I, C.POINTER(G))
sig("nv_group_close", I, G)
sig("nv_group_health", I, G)
sig("nv_group_backend", C.c_char_p, G)
for name in ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter", "sum_gradients"]:
    sig("nv_dist_" + name, P, P, G)
sig("nv_dist_send", P, P, I, G)
sig("nv_dist_recv", P, IP, I, I, I, G)
sig("nv_dist_recv_like", P, P, I, G)
lib = nvc.lib


def init():
    g = G(0)
    st = lib.nv_dist_init(os.environ.get("NUVEC_DIST_BACKEND", "any").encode(), True, C.byref(g))
    assert st == 0, lib.nv_last_error().decode()
    return g.value


def rank_size(g):
    r, s = C.c_int(), C.c_int()
    assert lib.nv_group_rank(g, C.byref(r)) == 0
    assert lib.nv_group_size(g, C.byref(s)) == 0
    return r.value, s.value


def data(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in nvc.INTS:
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return rng.standard_normal(shape).astype(nvc.np_dtype(dtype))


def reference(op, xs, rank):
    if op == "all_gather":
        return np.concatenate([x.reshape((1,) if x.ndim == 0 else x.shape) for x in xs], axis=0)
    if xs[0].dtype == bool:
        stack = np.stack(xs)
        red = stack.all(axis=0) if op == "all_min" else stack.any(axis=0)
        if op == "sum_scatter":
            n = red.shape[0] // len(xs)
            red = red[rank * n:(rank + 1) * n]
        return red
    wide = [nvc.ref64(x) for x in xs]
    if op in ("all_sum", "sum_scatter"):
        s = sum(wide[1:], wide[0])
        if op == "sum_scatter":
            n = s.shape[0] // len(xs)
            s = s[rank * n:(rank + 1) * n]
        return s
    if xs[0].dtype.kind == "c":  # lexicographic order, as the reduction
        keys = [(x.real, x.imag) for x in xs]
        out = xs[0].copy()
        for x, (re, im) in zip(xs[1:], keys[1:]):
            better = (re > out.real) | ((re == out.real) & (im > out.imag))
            if op == "all_min":
                better = (re < out.real) | ((re == out.real) & (im < out.imag))
            out = np.where(better, x, out)
        return out
    f = np.maximum if op == "all_max" else np.minimum
    out = wide[0]
    for w in wide[1:]:
        out = f(out, w)
    return out


def check_same_everywhere(s, g, got):
    """Every rank got the same bits: the all_gather of the result has equal rows."""
    h = s.array(np.ascontiguousarray(got).reshape(-1).view(np.uint8))
    allg = s.read(s.own(lib.nv_dist_all_gather(h, g)))
    rows = allg.reshape(rank_size(g)[1], -1)
    assert (rows == rows[0]).all(), "ranks got different bits"


def scenario_matrix(g):
    rank, size = rank_size(g)
    shapes = [(0,), (), (1,), (7,), (6, 5), (size * 3, 2)]
    with nvc.Session() as s:
        for dtype in nvc.DTYPES:
            if dtype == "bfloat16" and nvc.BF16 is None:
                continue
            for si, shape in enumerate(shapes):
                xs = [data(dtype, shape, 1000 * si + r) for r in range(size)]
                for op in ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter"]:
                    if op == "sum_scatter" and (len(shape) == 0 or shape[0] % size):
                        continue
                    layout = "transposed" if len(shape) == 2 else "contiguous"
                    h = s.view(xs[rank], layout)
                    got = s.read(s.own(getattr(lib, "nv_dist_" + op)(h, g)))
                    want = reference(op, xs, rank)
                    if op == "all_gather" or dtype in ("bool",) or dtype in nvc.INTS:
                        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"{op} {dtype} {shape}")
                    else:
                        nvc.assert_close(got, want, dtype)
                    if op != "sum_scatter":  # each rank has its own part
                        check_same_everywhere(s, g, got)
        # NaN and infinities propagate through max and min (NumPy's maximum/minimum).
        xs = [np.array([np.nan if r == 0 else 1.0, np.inf, -np.inf, float(r)], np.float32)
              for r in range(size)]
        for op in ["all_max", "all_min", "all_sum"]:
            got = s.read(s.own(getattr(lib, "nv_dist_" + op)(s.array(xs[rank]), g)))
            want = reference(op, xs, rank).astype(np.float32)
            np.testing.assert_array_equal(got, want, err_msg=op)
        # Several MiB, so the transfer is pipelined over many socket reads in both directions.
        for dtype, n in [("float32", 3 * 2**20 + 5), ("float16", 2**20 + 3), ("int64", 2**19 + 1)]:
            xs = [data(dtype, (n,), 77 + r) for r in range(size)]
            got = s.read(s.own(lib.nv_dist_all_sum(s.array(xs[rank]), g)))
            want = reference("all_sum", xs, rank)
            if dtype == "int64":
                np.testing.assert_array_equal(got, want.astype(np.int64))
            else:
                nvc.assert_close(got, want, dtype)
            check_same_everywhere(s, g, got)
            got = s.read(s.own(lib.nv_dist_all_gather(s.array(xs[rank]), g)))
            np.testing.assert_array_equal(got, np.concatenate(xs))
        m = size * (2**18 + 1)
        xs = [data("float32", (m,), 9 + r) for r in range(size)]
        got = s.read(s.own(lib.nv_dist_sum_scatter(s.array(xs[rank]), g)))
        nvc.assert_close(got, reference("sum_scatter", xs, rank), "float32")


def send(s, x, dst, g):
    h = s.own(lib.nv_dist_send(s.array(x), dst, g))
    got = s.read(h)
    np.testing.assert_array_equal(got, x)


def recv(s, shape, dtype, src, g):
    sh, nd = nvc.ints(shape)
    return s.own(lib.nv_dist_recv(sh, nd, nvc.CODE[dtype], src, g))


def scenario_p2p(g):
    rank, size = rank_size(g)
    with nvc.Session() as s:
        # Every ordered pair, neighbours or not, in one agreed order.
        for src in range(size):
            for dst in range(size):
                if src == dst:
                    continue
                x = data("float32", (3, src + 2 * dst + 1), 10 * src + dst)
                if rank == src:
                    send(s, x, dst, g)
                elif rank == dst:
                    got = s.read(recv(s, x.shape, "float32", src, g))
                    np.testing.assert_array_equal(got, x)
        # A big transfer, and an empty one.
        big = data("int32", (2**20 + 7,), 5)
        empty = np.zeros((0, 3), np.float64)
        if rank == 0:
            send(s, big, size - 1, g)
            send(s, empty, size - 1, g)
        elif rank == size - 1:
            np.testing.assert_array_equal(s.read(recv(s, big.shape, "int32", 0, g)), big)
            like = s.array(np.zeros((0, 3), np.float64))
            np.testing.assert_array_equal(s.read(s.own(lib.nv_dist_recv_like(like, 0, g))), empty)
        # Another dtype or shape than the receiver's: an error naming both; the payload is
        # drained, so the next transfer on the connection still arrives whole.
        x = data("float32", (2**20 + 1,), 6)
        y = data("int16", (5,), 7)
        if rank == 0:
            send(s, x, 1, g)
            send(s, y, 1, g)
        elif rank == 1:
            try:
                s.read(recv(s, (3,), "int32", 0, g))
                raise AssertionError("a mismatched recv succeeded")
            except nvc.NuvecError as e:
                assert "recv: rank 0 sent another dtype or shape than int32 (3,)" in e.message, e.message
                assert "float32" in e.message, e.message
            np.testing.assert_array_equal(s.read(recv(s, y.shape, "int16", 0, g)), y)
        # Argument checks.
        for peer in (rank, size, -1):
            st, msg = s.status(s.own(lib.nv_dist_send(s.array(y), peer, g)))
            assert st == 1 and f"send: rank {peer} is not another rank of a group of {size}" in msg, msg


def scenario_split(g):
    rank, size = rank_size(g)
    sub = G(0)
    assert lib.nv_group_split(g, rank % 2, size - rank, C.byref(sub)) == 0, lib.nv_last_error()
    members = [r for r in range(size) if r % 2 == rank % 2]
    members.sort(key=lambda r: size - r)  # by key
    sr, ss = rank_size(sub.value)
    assert ss == len(members) and sr == members.index(rank), (sr, ss, members)
    with nvc.Session() as s:
        if ss > 1:
            got = s.read(s.own(lib.nv_dist_all_sum(s.array(np.array([float(rank)], np.float32)), sub.value)))
            assert got[0] == sum(members), (got, members)
            got = s.read(s.own(lib.nv_dist_all_gather(s.array(np.array([rank], np.int32)), sub.value)))
            assert list(got) == members, (got, members)
        else:
            assert sub.value == 0  # a group of one collapses to the size-1 group
        # Every peer is alive until the next collective completes: health sees them all.
        assert lib.nv_group_health(g) == 0, lib.nv_last_error()
        # The parent still works after (and between) its subgroup's operations.
        got = s.read(s.own(lib.nv_dist_all_sum(s.array(np.array([1], np.int64)), g)))
        assert got[0] == size
        assert lib.nv_group_close(sub.value) == 0
        if ss > 1:
            st, msg = s.status(s.own(lib.nv_dist_all_sum(s.array(np.ones(2, np.float32)), sub.value)))
            assert st == 3 and "all_sum: the group was closed" in msg, (st, msg)
        # A collective recorded before the close fails when evaluated after it.
        pending = s.own(lib.nv_dist_all_sum(s.array(np.ones(2, np.float32)), g))
        assert lib.nv_group_close(g) == 0
        try:
            s.read(pending)
        except nvc.NuvecError as e:
            assert "all_sum: the group was closed" in e.message, e.message
        else:
            raise AssertionError("a collective recorded before close succeeded after it")


def scenario_lost(g, how):
    """The last rank dies (SIGKILL) or stops answering (SIGSTOP) before a large all_sum; the
    others must fail naming a rank within the bound, and print the time it took."""
    rank, size = rank_size(g)
    with nvc.Session() as s:
        x = s.array(np.ones(2**22, np.float32))
        got = s.read(s.own(lib.nv_dist_all_sum(x, g)))  # everyone is there
        assert got[0] == size
        if rank == size - 1:
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
            time.sleep(60)
            return
        t0 = time.monotonic()
        try:
            s.read(s.own(lib.nv_dist_all_sum(x, g)))
        except nvc.NuvecError as e:
            took = time.monotonic() - t0
            print(f"rank {rank}: lost peer detected after {took:.3f} s: {e.message}", flush=True)
            assert e.status == 8, e  # NV_ERR_PEER_LOST
            assert "all_sum: rank " in e.message, e.message
            bound = 1.0 if how == "kill" else float(os.environ["NUVEC_DIST_TIMEOUT"]) + 1.5
            assert took < bound, took
            # The group is failed from now on, and health says so.
            assert lib.nv_group_health(g) != 0
            return
        raise AssertionError("the collective succeeded without its peer")


def scenario_busy(g):
    """The last rank computes for 2.5 s (its heartbeat thread still answers) before joining an
    all_sum: with NUVEC_DIST_TIMEOUT=1 the others wait for it instead of declaring it lost."""
    rank, size = rank_size(g)
    with nvc.Session() as s:
        if rank == size - 1:
            time.sleep(2.5)
        got = s.read(s.own(lib.nv_dist_all_sum(s.array(np.ones(1000, np.float32)), g)))
        assert (got == size).all()


def scenario_header(g):
    """Rank 0 of a 2-rank job whose rank 1 is the test's raw socket peer (test_ring.py)."""
    with nvc.Session() as s:
        try:
            s.read(recv(s, (2,), "float32", 1, g))
            raise AssertionError("a recv without header succeeded")
        except nvc.NuvecError as e:
            assert "recv: rank 1 sent no array header" in e.message, e.message
        try:
            s.read(recv(s, (2,), "float32", 1, g))
            raise AssertionError("a mismatched recv succeeded")
        except nvc.NuvecError as e:
            assert "sent another dtype or shape than float32 (2,)" in e.message, e.message
            assert "it sent int16 (3,4)" in e.message, e.message
        got = s.read(recv(s, (2,), "float32", 1, g))
        np.testing.assert_array_equal(got, np.array([1.5, -2.0], np.float32))
        send(s, np.arange(6, dtype=np.int64).reshape(2, 3), 1, g)


def scenario_gpu(g):
    """Collectives on a GPU stream (tests/gpu/test_gpu_distributed.py): every dtype and size as
    in the matrix, the GPU results equal to the same collective's on the CPU stream, and none
    through the CPU fallback."""
    sig("nv_gpu", nvc.Device, C.c_int)
    sig("nv_cpu", nvc.Device)
    sig("nv_set_default_device", I, nvc.Device)
    sig("nv_gpu_fallback_count", C.c_uint64)
    rank, size = rank_size(g)
    gpu = rank if os.environ.get("NUVEC_TEST_GPU_PER_RANK") == "1" else 0
    nccl = lib.nv_group_backend(g) == b"nccl"
    before = lib.nv_gpu_fallback_count()
    with nvc.Session() as s:
        for dtype in nvc.DTYPES:
            if dtype == "bfloat16" and nvc.BF16 is None:
                continue
            for si, shape in enumerate([(0,), (), (7,), (size * 3, 5), (size * 2**18 + 2,)]):
                x = data(dtype, shape, 500 * si + rank)
                for op in ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter"]:
                    if op == "sum_scatter" and (len(shape) == 0 or shape[0] % size):
                        continue
                    res = {}
                    for where in ("cpu", "gpu"):
                        dev = lib.nv_gpu(gpu) if where == "gpu" else lib.nv_cpu()
                        assert lib.nv_set_default_device(dev) == 0
                        h = s.view(x, "transposed" if len(shape) == 2 else "contiguous")
                        res[where] = s.read(s.own(getattr(lib, "nv_dist_" + op)(h, g)))
                    assert lib.nv_set_default_device(lib.nv_cpu()) == 0
                    if nccl and op in ("all_sum", "sum_scatter") and dtype in nvc.FLOATS + ["complex64"]:
                        # NCCL sums in its own order (and float16/bfloat16 in the dtype).
                        nvc.assert_close(res["gpu"], nvc.ref64(res["cpu"]), dtype,
                                         rtol=1e-2 if dtype in ("float16", "bfloat16") else None,
                                         atol=2e-2 if dtype in ("float16", "bfloat16") else None)
                    else:
                        np.testing.assert_array_equal(res["gpu"], res["cpu"], err_msg=f"{op} {dtype} {shape}")
        y = data("float32", (5, 3), 3)
        for where in ("gpu", "cpu"):
            assert lib.nv_set_default_device(lib.nv_gpu(gpu) if where == "gpu" else lib.nv_cpu()) == 0
            if rank == 0:
                send(s, y, size - 1, g)
            elif rank == size - 1:
                np.testing.assert_array_equal(s.read(recv(s, y.shape, "float32", 0, g)), y)
        assert lib.nv_set_default_device(lib.nv_cpu()) == 0
    assert lib.nv_gpu_fallback_count() == before, "a collective ran through the CPU fallback"


def main():
    g = init()
    what = sys.argv[1]
    if what.startswith("lost-"):
        scenario_lost(g, what[5:])
    else:
        globals()["scenario_" + what](g)
    print(f"rank {rank_size(g)[0] if what != 'split' else '?'}: {what} ok", flush=True)


if __name__ == "__main__":
    main()
