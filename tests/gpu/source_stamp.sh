#!/usr/bin/env bash
# One hash over the sources a build depends on (run from the repository root): the stamp that
# ties tests/gpu/make_prebuilt.sh's binaries to the tree they were built from.
find src include bench examples tests/c tests/gpu tests/hrx python/src CMakeLists.txt cmake -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name 'CMakeLists.txt' -o -name '*.cmake' \) \
  2>/dev/null | LC_ALL=C sort | xargs cat | sha1sum | cut -d' ' -f1
