#!/usr/bin/env bash
# Installs what nuvec's build and tests need on Debian: the Debian packages when run as root
# (apt-get update once, then install), the Python packages for the python3 on PATH.
# When not root and something is missing, prints the exact commands and exits 1.
set -u
DEB_PKGS="cmake make gcc g++ clang pkg-config libcriterion-dev libopenblas-dev liblapacke-dev \
zlib1g-dev libminizip-dev libclang-rt-14-dev"
PY_PKGS="numpy pytest ml_dtypes safetensors gguf matplotlib"

missing_deb=""
for p in $DEB_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_deb="$missing_deb $p"
done
missing_py=""
for p in $PY_PKGS; do
  python3 -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$p') is None)" 2>/dev/null \
    || missing_py="$missing_py $p"
done

if [ -z "$missing_deb" ] && [ -z "$missing_py" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "nuvec setup: missing packages. Run as root:" >&2
  [ -n "$missing_deb" ] && echo "  apt-get update && apt-get install -y$missing_deb" >&2
  [ -n "$missing_py" ] && echo "  python3 -m pip install$missing_py" >&2
  exit 1
fi
if [ -n "$missing_deb" ]; then
  echo "nuvec setup: installing Debian packages:$missing_deb"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq $missing_deb >/dev/null || {
    echo "nuvec setup: apt-get failed" >&2; exit 1; }
fi
if [ -n "$missing_py" ]; then
  echo "nuvec setup: installing Python packages:$missing_py"
  python3 -m pip install -q $missing_py 2>&1 | grep -v "WARNING: Running pip as the 'root'" || true
  for p in $missing_py; do
    python3 -c "import $p" 2>/dev/null || { echo "nuvec setup: pip could not install $p" >&2; exit 1; }
  done
fi
exit 0
