"""File I/O beside the reference implementations: .npy (NumPy), .npz stored (NumPy) and
safetensors (the safetensors package's NumPy API), files hot in the page cache. "load" means
the data ends up in the caller's memory: nuvec loads (zero-copy where it can) and copies each
array out with nv_array_read; the peers return NumPy arrays. "save" writes a whole file."""
import ctypes as C
import os
import tempfile

import numpy as np

from benchlib import BUILD, median_time, report, try_import

lib = C.CDLL(os.path.join(BUILD, "src", "libnuvec.so"))
P, PP, S = C.c_void_p, C.POINTER(C.c_void_p), C.c_char_p
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


def main():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4096, 4096)).astype(np.float32)  # 64 MiB
    many = {f"layer{i}.weight": rng.standard_normal((512, 512)).astype(np.float32) for i in range(64)}
    d = tempfile.mkdtemp()
    p = lambda n: os.path.join(d, n).encode()
    rows = []

    h = nv_array(big)
    out = np.empty_like(big)

    def nv_load_npy():
        a = P()
        assert lib.nv_load_npy(p("a.npy"), C.byref(a)) == 0
        assert lib.nv_array_read(a, out.ctypes.data, out.nbytes) == 0
        lib.nv_release(a)

    rows.append(("npy save 64 MiB", median_time(lambda: lib.nv_save(p("a.npy"), h)),
                 {"numpy": median_time(lambda: np.save(p("b.npy").decode(), big))}))
    rows.append(("npy load 64 MiB", median_time(nv_load_npy),
                 {"numpy": median_time(lambda: np.load(p("b.npy").decode()))}))

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

    rows.append(("savez 64 x 1 MiB", median_time(lambda: lib.nv_savez(p("a.npz"), m), repeat=5),
                 {"numpy": median_time(lambda: np.savez(p("b.npz").decode(), **many), repeat=5)}))
    rows.append(("npz load 64 x 1 MiB", median_time(nv_load_npz, repeat=5),
                 {"numpy": median_time(lambda: {k: v for k, v in np.load(p("b.npz").decode()).items()},
                                       repeat=5)}))

    st = try_import("safetensors.numpy") and __import__("safetensors.numpy").numpy
    if st:
        def nv_load_st():
            r = P()
            assert lib.nv_load_safetensors(p("a.safetensors"), C.byref(r), None) == 0
            read_all(r, outs)
            lib.nv_map_free(r)

        rows.append(("safetensors save 64 x 1 MiB",
                      median_time(lambda: lib.nv_save_safetensors(p("a.safetensors"), m, None)),
                      {"safetensors": median_time(lambda: st.save_file(many, p("b.safetensors").decode()))}))
        rows.append(("safetensors load 64 x 1 MiB", median_time(nv_load_st),
                     {"safetensors": median_time(lambda: st.load_file(p("b.safetensors").decode()))}))
    report("file I/O (page cache hot)", rows, ["numpy", "safetensors"])
    lib.nv_map_free(m)
    for hv in handles + [h]:
        lib.nv_release(hv)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    os.rmdir(d)


if __name__ == "__main__":
    main()
