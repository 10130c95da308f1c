"""File I/O beside the reference implementations: .npy (NumPy), .npz stored (NumPy) and
safetensors (the safetensors package's NumPy API), files hot in the page cache. "load" means
the data ends up in the caller's memory: nuvec loads (zero-copy where it can) and copies each
array out with nv_array_read; the peers return NumPy arrays. "save" writes a whole file. nuvec
and each peer run in processes of their own (bench/README.md), each in its own temporary
folder; PyTorch has no reader or writer of these formats (its own is pickle-based), so it is
not a peer here."""
import ctypes as C
import os
import tempfile

import numpy as np

from benchlib import BUILD, median_time, peer_results, report, serve_peer, try_import

CASES = ["npy save 64 MiB", "npy load 64 MiB", "savez 64 x 1 MiB", "npz load 64 x 1 MiB",
         "safetensors save 64 x 1 MiB", "safetensors load 64 x 1 MiB"]
PEERS = ["numpy", "safetensors"]
P, PP, S = C.c_void_p, C.POINTER(C.c_void_p), C.c_char_p
lib = None


def load_lib():
    """Loads libnuvec and declares the functions used here (in nuvec's process only)."""
    global lib
    lib = C.CDLL(os.path.join(BUILD, "src", "libnuvec.so"))
    for name, res, args in [
        ("nv_array_from_data", P, [P, C.POINTER(C.c_int), C.c_int, C.c_int]),
        ("nv_release", None, [P]),
        ("nv_array_read", C.c_int, [P, P, C.c_size_t]),
        ("nv_array_nbytes", C.c_size_t, [P]),
        ("nv_map_new", P, []),
        ("nv_map_free", None, [P]),
        ("nv_map_set", C.c_int, [P, S, P]),
        ("nv_map_size", C.c_size_t, [P]),
        ("nv_map_value", P, [P, C.c_size_t]),
        ("nv_load_npy", C.c_int, [S, PP]),
        ("nv_save", C.c_int, [S, P]),
        ("nv_savez", C.c_int, [S, P]),
        ("nv_load_npz", C.c_int, [S, PP]),
        ("nv_load_safetensors", C.c_int, [S, PP, PP]),
        ("nv_save_safetensors", C.c_int, [S, P, P]),
    ]:
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def nv_array(x):
    shape = (C.c_int * max(1, x.ndim))(*x.shape)
    return lib.nv_array_from_data(x.ctypes.data, shape, x.ndim, 11)  # float32


def read_all(m, outs):
    for i in range(lib.nv_map_size(m)):
        h = lib.nv_map_value(m, i)
        assert lib.nv_array_read(h, outs[i].ctypes.data, outs[i].nbytes) == 0


def data():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4096, 4096)).astype(np.float32)  # 64 MiB
    many = {f"layer{i}.weight": rng.standard_normal((512, 512)).astype(np.float32) for i in range(64)}
    return big, many


def nuvec_times(big, many, p):
    load_lib()
    h = nv_array(big)
    out = np.empty_like(big)

    def nv_load_npy():
        a = P()
        assert lib.nv_load_npy(p("a.npy"), C.byref(a)) == 0
        assert lib.nv_array_read(a, out.ctypes.data, out.nbytes) == 0
        lib.nv_release(a)

    res = {CASES[0]: median_time(lambda: lib.nv_save(p("a.npy"), h)),
           CASES[1]: median_time(nv_load_npy)}
    m = lib.nv_map_new()
    handles = [nv_array(v) for v in many.values()]
    for k, hv in zip(many, handles):
        lib.nv_map_set(m, k.encode(), hv)
    outs = [np.empty_like(v) for v in many.values()]

    def nv_load_npz():
        r = P()
        assert lib.nv_load_npz(p("a.npz"), C.byref(r)) == 0
        read_all(r, outs)
        lib.nv_map_free(r)

    def nv_load_st():
        r = P()
        assert lib.nv_load_safetensors(p("a.safetensors"), C.byref(r), None) == 0
        read_all(r, outs)
        lib.nv_map_free(r)

    res[CASES[2]] = median_time(lambda: lib.nv_savez(p("a.npz"), m), repeat=5)
    res[CASES[3]] = median_time(nv_load_npz, repeat=5)
    res[CASES[4]] = median_time(lambda: lib.nv_save_safetensors(p("a.safetensors"), m, None))
    res[CASES[5]] = median_time(nv_load_st)
    lib.nv_map_free(m)
    for hv in handles + [h]:
        lib.nv_release(hv)
    return res


def numpy_times(big, many, p):
    return {CASES[0]: median_time(lambda: np.save(p("b.npy").decode(), big)),
            CASES[1]: median_time(lambda: np.load(p("b.npy").decode())),
            CASES[2]: median_time(lambda: np.savez(p("b.npz").decode(), **many), repeat=5),
            CASES[3]: median_time(lambda: {k: v for k, v in np.load(p("b.npz").decode()).items()},
                                  repeat=5)}


def safetensors_times(big, many, p):
    st = try_import("safetensors.numpy") and __import__("safetensors.numpy").numpy
    if not st:
        return None
    return {CASES[4]: median_time(lambda: st.save_file(many, p("b.safetensors").decode())),
            CASES[5]: median_time(lambda: st.load_file(p("b.safetensors").decode()))}


def peer_times(peer, cases):
    """{case: seconds} of nuvec or one peer, in its own process (benchlib.serve_peer)."""
    d = tempfile.mkdtemp()
    try:
        fn = {"nuvec": nuvec_times, "numpy": numpy_times, "safetensors": safetensors_times}[peer]
        res = fn(*data(), lambda n: os.path.join(d, n).encode())
    finally:
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)
    return res and {k: v for k, v in res.items() if not cases or k in cases}


def main():
    res = peer_results(os.path.abspath(__file__), ["nuvec"] + PEERS)
    nv = res.pop("nuvec")
    rows = [(k, nv[k], {p: t[k] for p, t in res.items() if k in t}) for k in CASES if k in nv]
    report("file I/O (page cache hot)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
