"""The MPI backend (OpenMPI's libmpi, loaded at run time) under mpirun on the loopback: the same
scenarios as the ring's (tests/distributed/worker.py) with 2 and 3 ranks (the full matrix with 2, to keep the run short), started through
tools/nuvec-launch --backend mpi (mpirun --oversubscribe --mca btl tcp,self, and
--allow-run-as-root as root). Skipped where OpenMPI is not installed (tools/setup.sh --mpi)."""
import ctypes
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "..", "..", "tools", "nuvec-launch")
WORKER = os.path.join(HERE, "worker.py")


def have_mpi():
    if not shutil.which("mpirun"):
        return False
    try:
        ctypes.CDLL("libmpi.so.40")
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not have_mpi(), reason="OpenMPI is not installed")


@pytest.mark.parametrize("n,scenario", [(2, "matrix"), (3, "p2p"), (2, "split"), (3, "split")])
def test_mpi_scenarios(n, scenario):
    env = dict(os.environ)
    env.setdefault("NUVEC_LIB", os.path.join(HERE, "..", "..", "build", "src", "libnuvec.so"))
    p = subprocess.run([sys.executable, LAUNCH, "--backend", "mpi", "-n", str(n),
                        "--env", "NUVEC_LIB=" + env["NUVEC_LIB"], WORKER, scenario], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(f"{scenario} ok") == n, p.stdout
