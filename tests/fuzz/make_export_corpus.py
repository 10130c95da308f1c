"""Writes the export fuzzer's seed corpus (tests/fuzz/corpus/export/) with nuvec itself, the
reference of its own format: small files of element-wise graphs, views, keyword inputs,
several traces, constants, shapeless traces and metadata.

    PYTHONPATH=build/python python3 tests/fuzz/make_export_corpus.py
"""
import os

import nuvec as nv

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "export")
os.makedirs(here, exist_ok=True)


def out(name):
    return os.path.join(here, name)


x = nv.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
nv.export_function(out("elementwise"), lambda a, b: nv.exp(a) * b + 1, x, x)
nv.export_function(out("views"), lambda a: (a.T[1:, ::-1], a.reshape(3, 2)[2], a[None]), x)
nv.export_function(out("keywords"), lambda a, z=None: a @ z, x, z=x.T, metadata="{\"k\": 1}")
c = nv.arange(6, dtype=nv.float16).reshape(2, 3)
nv.eval(c)
with nv.exporter(out("traces_constants"), lambda *a: c.T[::2] * 2 + sum(a)) as e:
    e()
    e(nv.array(1.0))
    e(nv.array([1, 2], nv.int32))
nv.export_function(out("shapeless"), lambda a: a.reshape(-1, 2).sum(0) * 2,
                   nv.array([1.0, 2.0, 3.0, 4.0]), shapeless=True)
nv.export_function(out("no_inputs"), lambda: (nv.zeros((2, 2)), nv.random.uniform(shape=(3,))))
