#!/usr/bin/env bash
# Runs every benchmark driver (bench/bench_*.py) against the build in ${NUVEC_BUILD:-build}.
set -u
cd "$(dirname "$0")"
status=0
for d in bench_*.py; do
  python3 "$d" || status=1
done
exit $status
