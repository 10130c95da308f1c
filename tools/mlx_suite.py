#!/usr/bin/env python3
"""Counts how much of MLX's own Python test suite passes against nuvec.

Given a directory of MLX test files (MLX's python/tests, kept outside this repository), this
makes a copy in which only the imports name nuvec (mlx.core -> nuvec, mlx.nn -> nuvec.nn,
mlx.optimizers -> nuvec.optimizers, mlx.utils -> nuvec.utils), runs every test file under
pytest twice -- the originals with the installed MLX, the copies with nuvec -- and prints per
file how many tests pass under each. The test files themselves are never part of nuvec.

    python3 tools/mlx_suite.py ORIG_DIR [--copy DIR] [--nuvec-path build/python]
                               [--only test_x.py ...] [--json OUT.json] [--markdown OUT.md]

A test counts as passing when pytest reports it PASSED (a test whose subtests fail is FAILED).
Tests that fail under MLX itself are not counted for nuvec either: the bar is what MLX passes.
"""
import argparse
import io
import json
import os
import re
import subprocess
import sys
import tokenize

# Module paths of MLX and the nuvec module that stands in for each.
MODULES = {
    "core": "nuvec",
    "nn": "nuvec.nn",
    "optimizers": "nuvec.optimizers",
    "utils": "nuvec.utils",
}


def substitute(source):
    """Returns source with every dotted name mlx.<module> replaced by nuvec's module.

    The tokenizer finds the names, so text inside strings and comments (error messages,
    reprs such as "mlx.core.float32") stays as MLX wrote it."""
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    edits = []  # (row, start col, end col, replacement), applied right to left
    for i in range(len(toks) - 2):
        a, dot, b = toks[i], toks[i + 1], toks[i + 2]
        if (a.type == tokenize.NAME and a.string == "mlx" and dot.string == "."
                and b.type == tokenize.NAME and b.string in MODULES
                and a.start[0] == b.end[0]
                and (i == 0 or toks[i - 1].string != ".")):
            edits.append((a.start[0], a.start[1], b.end[1], MODULES[b.string]))
    for row, c0, c1, text in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:c0] + text + line[c1:]
    return "".join(lines)


RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+::\S+)(?: - (.*))?")
# pytest 9 reports a failed unittest subTest on its own line, "SUBFAILED(params) file::id - why",
# and the test itself as PASSED: such a test has failed.
SUBFAILED = re.compile(r"^SUBFAILED(?:\(.*?\))? (\S+\.py::\S+)(?: - (.*))?")


def run_file(directory, name, env, timeout):
    """Runs one test file under pytest; returns ({test id: outcome}, note)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
           "--no-header", "-o", "addopts=", name]
    try:
        p = subprocess.run(cmd, cwd=directory, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {}, {}, "timeout after %ds" % timeout
    out, why = {}, {}
    for line in p.stdout.splitlines():
        m = SUBFAILED.match(line)
        if m:
            tid = m.group(1)
            if out.get(tid) != "FAILED" and m.group(2):
                why[tid] = "subtest: " + m.group(2)
            out[tid] = "FAILED"
            continue
        m = RESULT.match(line)
        if m:
            tid = m.group(2)
            # A FAILED entry beats an earlier PASSED one for the same id (subtests).
            if out.get(tid) != "FAILED":
                out[tid] = m.group(1)
            if m.group(3):
                why[tid] = m.group(3)
    note = ""
    if not out:
        tail = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
        note = tail[-1][:160] if tail else "no output (rc %d)" % p.returncode
    return out, why, note


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("orig", help="directory holding MLX's test files (and mlx_tests.py)")
    ap.add_argument("--copy", help="where the nuvec copies go (default: ORIG/../nuvec)")
    ap.add_argument("--nuvec-path", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"),
        help="directory put on PYTHONPATH for the nuvec run")
    ap.add_argument("--only", nargs="*", help="test files to run (default: all test_*.py)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per file and run")
    ap.add_argument("--skip-mlx", action="store_true",
                    help="reuse the MLX outcomes of an earlier --json file")
    ap.add_argument("--json", help="write every test's outcome under both to this file")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--failures", action="store_true",
                    help="list the tests MLX passes and nuvec does not, with pytest's reason")
    args = ap.parse_args()

    orig = os.path.abspath(args.orig)
    copy = os.path.abspath(args.copy or os.path.join(orig, "..", "nuvec"))
    os.makedirs(copy, exist_ok=True)
    names = sorted(f for f in os.listdir(orig) if f.endswith(".py"))
    for f in names:
        with open(os.path.join(orig, f), encoding="utf-8") as fh:
            src = fh.read()
        with open(os.path.join(copy, f), "w", encoding="utf-8") as fh:
            fh.write(substitute(src))
    tests = args.only or [f for f in names if f.startswith("test_")]

    previous = {}
    if args.skip_mlx and args.json and os.path.exists(args.json):
        with open(args.json) as fh:
            previous = json.load(fh)

    base_env = dict(os.environ)
    base_env.pop("PYTHONPATH", None)
    nv_env = dict(base_env)
    nv_env["PYTHONPATH"] = os.path.abspath(args.nuvec_path)

    results = dict(previous)
    rows = []
    for t in tests:
        if args.skip_mlx and t in previous:
            mlx = previous[t]["mlx"]
        else:
            mlx, _, note = run_file(orig, t, base_env, args.timeout)
            if note:
                print("%s under MLX: %s" % (t, note), file=sys.stderr)
        nv, why, note = run_file(copy, t, nv_env, args.timeout)
        if note:
            print("%s under nuvec: %s" % (t, note), file=sys.stderr)
        bar = [k for k, v in mlx.items() if v == "PASSED"]
        ok = [k for k in bar if nv.get(k) == "PASSED"]
        rows.append((t, len(mlx), len(bar), len(ok)))
        results[t] = {"mlx": mlx, "nuvec": nv,
                      "why": {k: why[k] for k in bar if k in why and nv.get(k) != "PASSED"}}
        print("%-28s %5d %5d" % (t, len(bar), len(ok)), file=sys.stderr)

    lines = ["| file | tests | pass under MLX | pass under nuvec |", "|---|---:|---:|---:|"]
    for t, n, b, o in rows:
        lines.append("| %s | %d | %d | %d |" % (t, n, b, o))
    tn = sum(r[1] for r in rows)
    tb = sum(r[2] for r in rows)
    to = sum(r[3] for r in rows)
    lines.append("| **total** | %d | %d | %d (%.1f%%) |" % (tn, tb, to,
                                                         100.0 * to / tb if tb else 0.0))
    table = "\n".join(lines)
    if args.failures:
        for t in tests:
            r = results[t]
            for k, v in sorted(r["mlx"].items()):
                if v == "PASSED" and r["nuvec"].get(k) != "PASSED":
                    print("%s [%s] %s" % (k, r["nuvec"].get(k, "missing"),
                                          r["why"].get(k, "")[:150]))
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table + "\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
