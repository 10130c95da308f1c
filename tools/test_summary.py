#!/usr/bin/env python3
"""Aggregates nuvec's test results into one closing line: `N passed, N failed, N skipped`.

Reads every Criterion JSON report (`*.json`) and pytest JUnit report (`*.xml`) in the
results folder, and ctest's own JUnit file for tests that wrote no report of their own
(plain executables: one case each; a crashed Criterion binary counts as one failure).
Exits 1 if anything failed or nothing ran.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET


def main():
    results = sys.argv[1]
    ctest_junit = sys.argv[2] if len(sys.argv) > 2 else None
    passed = failed = skipped = 0
    reported = set()
    for name in sorted(os.listdir(results)) if os.path.isdir(results) else []:
        path = os.path.join(results, name)
        stem = name.rsplit(".", 1)[0]
        try:
            if name.endswith(".json"):
                with open(path) as f:
                    r = json.load(f)
                passed += r["passed"]
                failed += r["failed"] + r["errored"]
                skipped += r["skipped"]
                for suite in r["test_suites"]:
                    for t in suite["tests"]:
                        if t["status"] not in ("PASSED", "SKIPPED"):
                            print(f"FAILED {stem}: {suite['name']}::{t['name']}: "
                                  + "; ".join(t.get("messages", [])))
                reported.add(stem)
            elif name.endswith(".xml"):
                root = ET.parse(path).getroot()
                suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
                for s in suites:
                    n = int(s.get("tests", 0))
                    f_ = int(s.get("failures", 0)) + int(s.get("errors", 0))
                    sk = int(s.get("skipped", 0))
                    passed += n - f_ - sk
                    failed += f_
                    skipped += sk
                reported.add(stem)
        except (OSError, ValueError, KeyError, ET.ParseError) as e:
            print(f"FAILED {stem}: unreadable report ({e})")
            failed += 1
            reported.add(stem)
    if ctest_junit and os.path.exists(ctest_junit):
        root = ET.parse(ctest_junit).getroot()
        for case in root.iter("testcase"):
            name = case.get("name")
            status = case.get("status", "")
            if name in reported and status != "fail":
                continue
            if name in reported and status == "fail":
                # The binary exited non-zero although its report counted a failure already,
                # or it crashed after writing a partial report.
                continue
            if case.find("skipped") is not None or status in ("notrun", "disabled"):
                skipped += 1
            elif case.find("failure") is not None or status == "fail":
                print(f"FAILED {name} (no report: crashed or plain test failed)")
                failed += 1
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
