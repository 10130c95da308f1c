#!/usr/bin/env bash
# Installs what nuvec's build and tests need on Debian: the Debian packages when run as root
# (apt-get update once, then install), the Python packages for the python3 on PATH.
# When not root and something is missing, prints the exact commands and exits 1.
set -u
set -f  # package specs such as mlx[cpu] are not file globs
# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) and llvm-14 (the symbolizer
# for readable sanitizer reports) are for `make fuzz`; the library itself builds with gcc.
DEB_PKGS="cmake make gcc g++ clang pkg-config libcriterion-dev libopenblas-dev liblapacke-dev \
zlib1g-dev libminizip-dev libclang-rt-14-dev llvm-14"
# --mpi adds OpenMPI (the distributed MPI backend loads libmpi at run time; its tests use mpirun).
# --bench adds PyTorch (its CPU use), a peer of `make bench` only: the tests never import it.
bench=0
for arg in "$@"; do
  case "$arg" in
  --mpi) DEB_PKGS="$DEB_PKGS libopenmpi-dev openmpi-bin" ;;
  --bench) bench=1 ;;
  *) echo "nuvec setup: unknown option $arg (known: --mpi, --bench)" >&2; exit 2 ;;
  esac
done
# Python packages as import-name=pip-spec (the spec defaults to the name): NumPy and pytest for
# the tests, ml_dtypes/safetensors/gguf for reference files, MLX's CPU build as the peer (bench,
# bit-exact random), matplotlib for the loss curve and bench charts.
PY_PKGS="numpy pytest ml_dtypes safetensors gguf mlx.core=mlx[cpu] matplotlib"
[ "$bench" = 1 ] && PY_PKGS="$PY_PKGS torch"

missing_deb=""
for p in $DEB_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_deb="$missing_deb $p"
done
missing_py=""
missing_mods=""
for entry in $PY_PKGS; do
  mod=${entry%%=*}
  spec=${entry#*=}
  python3 -c "import importlib,sys; importlib.import_module('$mod')" >/dev/null 2>&1 \
    || { missing_py="$missing_py $spec"; missing_mods="$missing_mods $mod"; }
done

if [ -z "$missing_deb" ] && [ -z "$missing_py" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "nuvec setup: missing packages. Run as root:" >&2
  [ -n "$missing_deb" ] && echo "  apt-get update && apt-get install -y$missing_deb" >&2
  [ -n "$missing_py" ] && echo "  python3 -m pip install$(for p in $missing_py; do printf " '%s'" "$p"; done)" >&2
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
  for m in $missing_mods; do
    python3 -c "import $m" >/dev/null 2>&1 || { echo "nuvec setup: pip could not install $m" >&2; exit 1; }
  done
fi
exit 0
