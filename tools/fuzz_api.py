#!/usr/bin/env python3
"""A fuzzer of nuvec's Python API: every public callable (found by introspection of `nuvec`,
`nuvec.random`, the array's methods, operators, indexing and the transforms) called with
adversarial arguments, a batch of calls per child process.

A call fails when the child dies of a signal (a crash), raises SystemError, lets an exception
that is not an Exception escape, or runs longer than --call-timeout (a hang). Each failure is
printed with its reproducer line; the exit status is 1 when there was one.

    tools/fuzz_api.py --time 60 [--seed N]      # seeded, and the seed is printed
    make fuzz-api FUZZ_TIME=300

A reproducer runs from the repository root as
    PYTHONPATH=build/python:tools python3 -c "from fuzz_api import *; <line>"
(`from fuzz_api import *` brings the adversarial objects and mx, np and operator.)

Under AddressSanitizer: build the module with -fsanitize=address,undefined into another
directory, then run with LD_PRELOAD naming libasan.so and libubsan.so,
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 and
`--as-limit 0 --build <that directory>` (ASan reserves more address space than RLIMIT_AS allows).

Every call is one line of Python built from expression strings (the values below), so a line
is its own reproducer. The children run in a scratch directory (save/load write there), with
NUVEC_MEMORY_LIMIT and an address-space limit (RLIMIT_AS) so that no call takes more than a
few GiB of the machine, one kernel thread, and single-threaded OpenBLAS.
"""
import argparse
import operator  # noqa: F401 (the lines use it)
import os
import random
import re
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

if __name__ != "__main__":  # imported by a reproducer line, which uses mx, np and ml_dtypes
    import ml_dtypes  # noqa: F401
    import numpy as np  # noqa: F401

    import nuvec as mx  # noqa: F401

# ---- Adversarial objects (reproducer lines import them with `from fuzz_api import *`) ----


class Raised(Exception):
    """What the objects below raise from their special methods."""


class BadIndex:
    def __index__(self):
        raise Raised("__index__")


class BadFloat:
    def __float__(self):
        raise Raised("__float__")


class BadInt:
    def __int__(self):
        raise Raised("__int__")

    def __index__(self):
        raise Raised("__index__")


class BadBool:
    def __bool__(self):
        raise Raised("__bool__")


class BadIter(list):
    """A list whose __iter__ raises (its storage holds one array)."""

    def __iter__(self):
        raise Raised("__iter__")


class LyingLen(list):
    """A list whose __len__ claims a million items."""

    def __len__(self):
        return 10**6


class BadLen:
    """A sequence whose __len__ raises."""

    def __len__(self):
        raise Raised("__len__")

    def __getitem__(self, i):
        if i < 2:
            return 1
        raise IndexError(i)


class HugeSeq:
    """A sequence claiming 2**62 items."""

    def __len__(self):
        return 2**62

    def __getitem__(self, i):
        return 1


class BadArray:
    def __array__(self, *a, **k):
        raise Raised("__array__")


class SelfArray:
    """An object whose __array__ returns itself."""

    def __array__(self, *a, **k):
        return self


class BadDlpack:
    def __dlpack__(self, *a, **k):
        return 1

    def __dlpack_device__(self):
        return (1, 0)


class BadGetattr:
    def __getattr__(self, name):
        raise Raised(name)


class BadStr:
    def __str__(self):
        raise Raised("__str__")

    __repr__ = __str__


class BadHash:
    def __hash__(self):
        raise Raised("__hash__")


class IntSub(int):
    def __index__(self):
        raise Raised("__index__")


class FloatSub(float):
    def __complex__(self):
        raise Raised("__complex__")


def cyclic_list():
    x = []
    x.append(x)
    return x


def cyclic_dict():
    d = {}
    d["a"] = d
    return d


def deep_list(n, leaf=None):
    x = [] if leaf is None else leaf
    for _ in range(n):
        x = [x]
    return x


def mutating_list():
    """A list whose last item's __array__ empties the list while it is converted."""
    import numpy as np

    x = [1.0, 2.0]

    class Clears:
        def __array__(self, *a, **k):
            x.clear()
            return np.ones(2, np.float32)

    x.append(Clears())
    return x


def mutating_dict():
    """A dict whose key's __hash__ empties the dict (when a transform rebuilds it)."""
    d = {}

    class Key:
        def __hash__(self):
            d.clear()
            return 1

    d[Key()] = 1.0
    d["x"] = mx_ones(2)
    return d


def mx_ones(n):
    import nuvec

    return nuvec.ones(n)


def raising_fn(*a, **k):
    raise Raised("fn")


# ---- Values: expression strings, evaluated fresh for every call ----

GOOD = [
    "None", "True", "False", "0", "1", "2", "3", "-1", "0.5", "2.0",
    "mx.float32", "mx.int32", "mx.int8", "mx.uint8", "mx.bool_", "mx.float16", "mx.bfloat16",
    "mx.complex64", "mx.float64", "mx.int64", "mx.uint64", "mx.uint32",
    "mx.ones((2, 3))", "mx.arange(6).reshape(2, 3)", "mx.array(1.5)", "mx.array([1, 2, 3])",
    "mx.zeros((0,))", "mx.zeros((2, 0, 3))", "mx.ones((3,), mx.int32)", "mx.ones((2, 2), mx.float16)",
    "mx.ones((2,), mx.bfloat16)", "mx.array([True, False])", "mx.array([1 + 2j])",
    "mx.ones((2, 3), mx.uint64)", "mx.ones((2, 2), mx.float64)", "mx.ones((1, 1, 1, 1))",
    "mx.broadcast_to(mx.ones(3), (4, 3))", "mx.arange(12).reshape(3, 4).T",
    "mx.arange(10)[::3]", "mx.random.key(0)", "mx.array([0, 1])", "mx.array(2)",
    "(2, 3)", "(0,)", "()", "[1, 2]", "[0]", "[0, 1]", "(1, 0)", "[[1, 2], [3, 4]]", "[2.5]",
    "(-1,)", "[mx.ones(2), mx.ones(2)]", "{'a': mx.ones(2)}", "0, 1", "(0, 1)",
    "mx.cpu", "mx.default_stream(mx.cpu)", "'constant'", "'left'", "'xy'", "'ij'",
    "np.ones((2, 3), np.float32)", "np.arange(4, dtype=np.int16)", "np.float64(1.5)",
    "lambda *a, **k: a[0] if a else mx.ones(1)", "lambda x: (x * x).sum()", "lambda x, y=1: x",
    "mx.sum", "slice(None)", "slice(1, None, -1)", "Ellipsis",
]

BAD = [
    "2**31", "2**31 - 1", "-2**31 - 1", "2**32", "2**63", "-2**63", "-2**63 - 1", "2**64",
    "10**30", "-10**30", "2**16", "-7", "float('nan')", "float('inf')", "-float('inf')", "1e308",
    "-0.0", "1j", "''", "'x'", "'\\x00'", "'a.npy'", "b''", "b'\\x00\\x01'", "bytearray(3)",
    "memoryview(b'abcd')", "[]", "[[]]", "[[1, 2], [3]]", "[None]", "[2**31]", "[2**63]",
    "[1.5, 'a']", "(2**31,)", "(2**16, 2**16)", "(2**31 - 1, 2**31 - 1)", "(-1, 2)", "(1,) * 64",
    "(1,) * 65", "(0,) * 70", "tuple(range(70))", "[[[[[[1]]]]]]", "deep_list(200)",
    "deep_list(200000)", "deep_list(80, 1)", "cyclic_list()", "cyclic_dict()", "{}", "set()",
    "object()", "BadIndex()", "BadFloat()", "BadInt()", "BadBool()", "BadIter([mx.ones(1)])",
    "LyingLen([mx.ones(1)])", "BadLen()", "HugeSeq()", "BadArray()", "SelfArray()",
    "[SelfArray()]", "BadDlpack()", "BadGetattr()", "BadStr()", "BadHash()", "IntSub(2)",
    "[FloatSub(1.0), 1j]", "mutating_list()", "[BadIndex()]", "[1, BadIndex()]", "(BadFloat(),)",
    "{'x': BadArray()}", "{'a': cyclic_list()}",
    "[mx.ones(2)] * 70", "iter([1, 2])", "iter([mx.ones(1)])", "range(3)", "range(2**40)",
    "np.ones((4, 4))[::2, ::3]", "np.zeros((0, 3))", "np.array(['a'])", "np.array([None])",
    "np.ones((2, 2)).T", "np.array([True])", "np.ones(3, np.complex128)",
    "np.ones((2,), np.uint64)", "np.int64(2**62)", "np.float32(float('nan'))",
    "mx.ones((1,) * 64)", "mx.ones((2**20,))", "mx.zeros((2**14, 2**15), mx.bool_)",
    "mx.array(float('nan'))", "mx.array([float('inf'), -1.0])", "mx.array([-5, 7])",
    "mx.array([2**31 - 1], mx.int32)", "mx.array([255], mx.uint8)", "mx.array([True])",
    "mx.array([[0], [5]])", "mx.array([-10])", "mx.array([1.5])", "mx.ones((3, 1, 2), mx.int8)",
    "mx.gpu", "mx.Device(mx.cpu)", "mx.new_stream(mx.cpu)", "mx.random.key(2**64 - 1)",
    "raising_fn", "lambda: None", "lambda *a: a", "lambda *a: 'x'", "lambda *a: cyclic_list()",
    "lambda *a: [mx.ones(1)] * 70", "lambda x: x.item()", "mx.zeros", "int", "print",
    "slice(None, None, 2**31)", "slice(None, None, -2**31)", "slice(None, None, 0)",
    "slice(2**63, None)", "slice(-2**63, 2**63, 2**62)", "slice(None, None, BadIndex())",
    "(Ellipsis, Ellipsis)", "(None,) * 70", "(0, [0])", "([0], slice(None, None, 2**31))",
    "(slice(None, None, 2**31), [0])", "([0, 1], [0])", "([[0]], Ellipsis, [0])",
    "mx.array([True, False, True])", "(mx.array([5]),)", "(mx.array([-9]), 0)",
    "np.arange(6.0).reshape(2, 3)[:, ::-1]", "np.ones((2, 3), order='F')", "np.ones(3, '>f4')",
    "np.ones(3, np.float16)", "np.arange(4, dtype=np.uint8)[::-2]", "np.zeros((0, 3))[:, ::-1]",
    "np.array(['2020-01-01'], 'datetime64[D]')", "np.ones((2,), [('a', 'f4'), ('b', 'i4')])",
    "np.ones(3, np.float64).view(np.complex128)[:1]", "memoryview(np.ones((2, 3))).cast('B')",
    "memoryview(bytearray(8)).cast('d')", "np.ones((1,) * 32)", "mutating_dict()",
    "np.broadcast_to(np.ones(3), (4, 3))", "np.ones(3, np.longdouble)",
    "np.ones((2, 2), ml_dtypes.bfloat16)", "np.ones(2, ml_dtypes.float8_e4m3fn)",
    "(slice(None), None, [1])", "2.5", "[0.5]", "(1.0,)",
]

# Plausible values by argument name, so that calls get past the first check more often.
ROLES = {
    "shape": ["(2, 3)", "(0,)", "()", "[4]", "3", "(1, 2, 1)"],
    "dtype": ["mx.float32", "mx.int32", "mx.int8", "mx.uint8", "mx.bool_", "mx.float16",
              "mx.bfloat16", "mx.complex64", "mx.float64", "mx.int64", "mx.uint64", "None"],
    "int": ["0", "1", "2", "-1", "3", "None"],
    "bool": ["True", "False"],
    "key": ["mx.random.key(0)", "None"],
    "stream": ["mx.cpu", "mx.default_stream(mx.cpu)", "None"],
    "index": ["0", "-1", "slice(None)", "(0, 1)", "[0, 1]", "mx.array([1, 0])", "(Ellipsis, 0)",
              "None", "(slice(None, None, -1), [0])", "mx.array([True, False])", "(1, slice(0, 2))",
              "([0, 1], slice(None), None)"],
    "fn": ["lambda x, *a: (x * x).sum()", "lambda *a: a[0]", "lambda x, *a: [x, {'y': x * 2}]",
           "lambda x, *a: x.sum(axis=0)"],
    "array": ["mx.ones((2, 3))", "mx.arange(6).reshape(2, 3)", "mx.array([1, 2, 3])", "1.5", "2",
              "mx.array([0.25, 0.5])", "[1, 2]", "mx.ones((3, 3))", "mx.random.normal((4,))"],
}
INT_ARGS = {"axis", "k", "n", "m", "num", "offset", "axis1", "axis2", "kth", "decimals",
            "start_axis", "end_axis", "source", "destination", "ddof", "width", "repeats", "M",
            "num_samples", "indices_or_sections", "seed", "start", "stop", "step"}
SHAPE_ARGS = {"shape", "reps", "shift", "axes", "pad_width", "start_indices", "slice_size"}
BOOL_ARGS = {"keepdims", "reverse", "inclusive", "endpoint", "precise", "equal_nan", "sparse",
             "copy", "allow_col_major"}


def role_values(name):
    if name in SHAPE_ARGS:
        return ROLES["shape"]
    if name in INT_ARGS:
        return ROLES["int"]
    if name in BOOL_ARGS:
        return ROLES["bool"]
    if name in ("fun", "f"):
        return ROLES["fn"]
    return ROLES.get(name, ROLES["array"])


KWNAMES = ["axis", "dtype", "shape", "stream", "key", "keepdims", "bogus"]

SAMPLE_ARRAYS = ["mx.arange(6).reshape(2, 3)", "mx.ones((2, 3), mx.float16)",
                 "mx.array([1, 2, 3])", "mx.array(2.5)", "mx.zeros((0, 2))",
                 "mx.ones((2, 2), mx.complex64)", "mx.array([True, False])",
                 "mx.arange(24).reshape(2, 3, 4)", "mx.ones((2,), mx.uint64)"]

# Functions that would change the child in ways that hide later bugs (the memory limits).
SKIP = {"set_memory_limit", "set_cache_limit"}

# ---- Targets: callable expressions found by introspection ----


def doc_kwargs(obj):
    """The argument names an op's __doc__ lists ("zeros(shape, dtype=..., *, stream=None)"),
    the required ones first (their count is `required`: a list subclass carries it)."""
    doc = getattr(obj, "__doc__", None) or ""
    m = re.match(r"\s*\w+\(([^)]*)\)", doc)
    names = ArgNames()
    if not m:
        return names
    for part in m.group(1).split(","):
        name = part.strip().split("=")[0].strip("* ")
        if name.isidentifier() and name != "stream":
            names.append(name)
            if "=" not in part:
                names.required = len(names)
    return names


class ArgNames(list):
    required = 0


def targets(mx):
    """(expression, argument names, name its messages should start with or None) for every
    callable to fuzz."""
    out = []
    for mod, prefix in ((mx, "mx."), (mx.random, "mx.random.")):
        for name in sorted(dir(mod)):
            obj = getattr(mod, name)
            if name.startswith("_") or name in SKIP or not callable(obj) or name == "random":
                continue
            names = doc_kwargs(obj) if isinstance(obj, type(mx.sum)) else None
            out.append((prefix + name, names, getattr(obj, "__name__", name)))
    methods = sorted(n for n in dir(mx.array) if not n.startswith("_") and callable(getattr(mx.array, n)))
    methods += ["__format__", "__array__", "__dlpack__", "__deepcopy__", "__reduce__",
                "__getitem__", "__setitem__", "__contains__", "__iter__", "__len__", "__bool__",
                "__int__", "__float__", "__index__"]
    for a in SAMPLE_ARRAYS:
        for m in methods:
            obj = getattr(mx.array, m, None)
            names = doc_kwargs(obj) if isinstance(obj, type(mx.sum)) else None
            if names is not None:  # the array is the first argument
                rest = ArgNames(names[1:])
                rest.required = max(names.required - 1, 0)
                names = rest
            out.append((f"{a}.{m}", names, m))
        for op in ("neg", "abs", "invert"):
            out.append((f"(lambda *v: operator.{op}({a}, *v))", [], None))
        for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_",
                   "or_", "xor", "lshift", "rshift", "lt", "le", "eq", "ne", "gt", "ge", "iadd",
                   "imul", "contains"):
            out.append((f"(lambda *v: operator.{op}({a}, *v))", ["array"], None))
        out.append((f"(lambda *v: operator.getitem({a}, *v))", ["index"], None))
        out.append((f"(lambda *v: operator.setitem({a}, *v))", ["index", "array"], None))
        out.append((f"(lambda k, *v: {a}.at[k].add(*v))", ["index", "array"], None))
        out.append((f"(lambda k, *v: {a}.at[k].maximum(*v))", ["index", "array"], None))
        out.append((f"(lambda *v: operator.add(v[0] if v else 1, {a}))", ["array"], None))
    fa = ["fn", "array", "array"]
    for t in ("grad", "value_and_grad", "vmap", "checkpoint", "custom_function"):
        out.append((f"(lambda f, *a, **k: mx.{t}(f)(*a, **k))", fa, t))
    out.append(("(lambda f, ax, *a: mx.vmap(f, in_axes=ax)(*a))", ["fn", "int", "array"], "vmap"))
    out.append(("(lambda f, ax, *a: mx.vmap(f, out_axes=ax)(*a))", ["fn", "int", "array"], "vmap"))
    out.append(("(lambda f, n, *a: mx.grad(f, argnums=n)(*a))", ["fn", "int", "array"], "grad"))
    out.append(("(lambda f, n, *a: mx.grad(f, argnames=n)(*a))", ["fn", "int", "array"], "grad"))
    out.append(("(lambda *a: mx.vjp(lambda *x: x[0], *a))", ["array", "array"], "vjp"))
    out.append(("(lambda *a: mx.jvp(lambda *x: x[0], *a))", ["array", "array"], "jvp"))
    out.append(("(lambda n: mx.vjp(lambda *x: x[-1], [mx.ones(1)] * min(n, 10**5), [mx.ones(1)]))",
                ["int"], "vjp"))
    return out


def make_line(rng, target, kwnames, label):
    """One call of `target`: its arguments (by position, some by keyword) mostly plausible for
    their names, with adversarial values among them; extra or unknown arguments now and then."""

    def value(name=None):
        r = rng.random()
        if r < 0.35:
            return rng.choice(BAD)
        if r < 0.5 or name is None:
            return rng.choice(GOOD)
        return rng.choice(role_values(name))

    if kwnames is not None:
        req = getattr(kwnames, "required", 0)
        npos = rng.randint(req, len(kwnames)) if rng.random() < 0.85 else rng.randint(0, len(kwnames))
        args = [value(n) for n in kwnames[:npos]]
        kws = {n: value(n) for n in kwnames[npos:] if rng.random() < 0.3}
    else:
        args = [value() for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))]
        kws = {}
    if rng.random() < 0.1:
        args.append(value())
    if rng.random() < 0.1:
        kws[rng.choice(KWNAMES)] = value()
    parts = args + [f"{k}=({v})" for k, v in kws.items()]
    return label or "-", f"{target}({', '.join(parts)})"


# ---- The child: runs lines and reports on a pipe ----


def child(fd, seed, batch, start, count):
    proto = os.fdopen(fd, "w", buffering=1)
    import ml_dtypes
    import numpy as np

    import nuvec as mx

    ns = dict(globals())
    ns.update(mx=mx, np=np, ml_dtypes=ml_dtypes)
    rng = random.Random(f"{seed}:{batch}")
    tg = targets(mx)
    lines = [make_line(rng, *rng.choice(tg)) for _ in range(start + count)][start:]
    for i, (label, line) in enumerate(lines, start):
        proto.write(f"L {i} {label} {line}\n")
        try:
            exec(line, ns)
            proto.write("R ok\n")
        except SystemError as e:
            proto.write(f"F SystemError {one_line(e)}\n")
        except Exception as e:
            proto.write(f"R {type(e).__name__} {one_line(e)}\n")
        except BaseException as e:  # noqa: B036 (an escaping non-Exception is a failure)
            proto.write(f"F {type(e).__name__} (not an Exception) {one_line(e)}\n")
    proto.write("E\n")
    proto.close()
    os._exit(0)


def one_line(e):
    try:
        s = str(e)
    except Exception:
        s = "<str failed>"
    return s.replace("\n", " ")[:300]


def limit_child(as_bytes):
    def f():
        if as_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()
    return f


def run_batch(args, seed, batch, start, scratch, env, stats, failures):
    """Runs one batch from call `start`; returns the index to resume from (None when done)."""
    r, w = os.pipe()
    err = open(os.path.join(scratch, "stderr"), "w+b")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(w), str(seed),
                          str(batch), str(start), str(args.batch)],
                         cwd=scratch, env=env, stdout=subprocess.DEVNULL, stderr=err,
                         pass_fds=(w,), preexec_fn=limit_child(args.as_limit << 30))
    os.close(w)
    buf, last, label, last_i, done, hang = b"", None, "-", start - 1, False, False
    deadline = time.monotonic() + args.call_timeout + 20  # import time
    while True:
        t = deadline - time.monotonic()
        ready = select.select([r], [], [], max(t, 0))[0] if t > 0 else []
        if not ready:
            hang = True
            break
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            msg = raw.decode("utf-8", "replace")
            if msg.startswith("L "):
                _, i, label, line = msg.split(" ", 3)
                last, last_i = line, int(i)
                stats["calls"] += 1
                deadline = time.monotonic() + args.call_timeout
            elif msg.startswith("R "):
                stats["ok" if msg == "R ok" else "raised"] += 1
                kind = msg.split(" ", 2)
                if len(kind) == 3 and label != "-" and not names_function(label, kind[1], kind[2]):
                    stats["unnamed"] += 1
                    key = re.sub(r"\d+", "N", kind[2])[:60]
                    if key not in stats["examples"] and len(stats["examples"]) < 300:
                        stats["examples"][key] = (last, kind[1], kind[2])
            elif msg.startswith("F "):
                failures.append(("exception", msg[2:], last, label))
            elif msg == "E":
                done = True
    os.close(r)
    if hang:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    err.seek(0)
    tail = err.read()[-1500:].decode("utf-8", "replace")
    err.close()
    if hang:
        failures.append(("hang", f"no progress in {args.call_timeout} s", last, label))
        return last_i + 1
    if last is None and not done:
        sys.exit(f"fuzz_api: the child failed before its first call:\n{tail}")
    if p.returncode != 0 or not done:
        sig = -p.returncode if p.returncode < 0 else None
        what = f"signal {signal.Signals(sig).name}" if sig else f"exit status {p.returncode}"
        fatal = [x for x in tail.splitlines() if x.startswith(("Fatal Python", "==", "Assertion"))]
        failures.append(("crash", f"{what}" + (f" ({fatal[-1][:200]})" if fatal else ""), last, label))
        return last_i + 1
    return None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*map(int, sys.argv[2:7]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time", type=float, default=float(os.environ.get("FUZZ_TIME", 60)),
                    help="seconds to run (default FUZZ_TIME or 60)")
    ap.add_argument("--seed", type=int, default=None, help="the seed (default: drawn, printed)")
    ap.add_argument("--batch", type=int, default=400, help="calls per child process")
    ap.add_argument("--call-timeout", type=float, default=30, help="seconds one call may take")
    ap.add_argument("--memory", type=int, default=2, help="NUVEC_MEMORY_LIMIT in GiB")
    ap.add_argument("--as-limit", type=int, default=4,
                    help="RLIMIT_AS of a child in GiB (0: none, for a build under ASan)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory")
    ap.add_argument("--names", action="store_true",
                    help="also list (one per kind) exceptions whose message does not name the function")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)  # the children run elsewhere
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"fuzz_api: seed {seed}, {args.time:g} s, {args.batch} calls per child "
          f"(reproduce: tools/fuzz_api.py --seed {seed} --time {args.time:g})", flush=True)
    env = dict(os.environ)
    env.update(PYTHONPATH=os.pathsep.join([os.path.join(args.build, "python"), HERE]),
               NUVEC_MEMORY_LIMIT=str(args.memory << 30), NUVEC_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="1")
    scratch = tempfile.mkdtemp(prefix="nuvec-fuzz-api-")
    stats = {"calls": 0, "ok": 0, "raised": 0, "unnamed": 0, "examples": {}}
    failures = []
    end = time.monotonic() + args.time
    batch = 0
    try:
        while time.monotonic() < end:
            start = 0
            while start is not None and time.monotonic() < end:
                start = run_batch(args, seed, batch, start, scratch, env, stats, failures)
                for f in os.listdir(scratch):  # what save calls wrote
                    if f != "stderr":
                        path = os.path.join(scratch, f)
                        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            batch += 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(seed, batch, stats, failures, args.names)
    sys.exit(1 if failures else 0)


def names_function(label, typ, msg):
    """Whether an exception message names the called function near its start (CPython's own
    "nuvec._core.f() takes ..." and "array.item() ..." count). The objects' own exceptions
    and the harness's lambdas' are not nuvec's messages."""
    if typ == "Raised" or "<lambda>()" in msg:
        return True
    return msg.startswith(f"[{label}]") or re.search(rf"\b{re.escape(label)}\b", msg[:48]) is not None


def report(seed, batches, stats, failures, list_names):
    print(f"fuzz_api: {stats['calls']} calls in {batches} batches: {stats['ok']} returned, "
          f"{stats['raised']} raised an Exception "
          f"({stats['unnamed']} of those messages do not name the function)")
    if list_names:
        for line, typ, msg in stats["examples"].values():
            print(f"  unnamed {typ}: {msg[:120]}\n      {line}")
    # One reproducer per kind of failure and function (the first, usually the shortest path).
    seen = set()
    for kind, what, line, label in failures:
        key = (kind, label if label != "-" else (line or "")[:40], re.sub(r"\d+", "N", what)[:40])
        if key in seen:
            continue
        seen.add(key)
        print(f"FAILURE ({kind}): {what}\n  reproducer: PYTHONPATH=build/python:tools python3 -c "
              f"{shlex.quote('from fuzz_api import *; ' + (line or ''))}")
    print(f"fuzz_api: {len(failures)} failures (seed {seed})")


if __name__ == "__main__":
    main()
