"""Multi-process tests of the distributed family over the ring backend on the loopback (DESIGN
§12): 2, 3 and 4 local ranks started by tools/nuvec-launch (or directly, with random free
ports, where the test must control one rank), each running a scenario of worker.py against
NumPy. Needs only libnuvec.so (NUVEC_LIB) and NumPy."""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
LAUNCH = os.path.join(ROOT, "tools", "nuvec-launch")
WORKER = os.path.join(HERE, "worker.py")


def env(**extra):
    e = dict(os.environ)
    e.setdefault("NUVEC_LIB", os.path.join(ROOT, "build", "src", "libnuvec.so"))
    e["NUVEC_DIST_CONNECT_TIMEOUT"] = "20"
    e.update(extra)
    return e


def launch(n, scenario, timeout=60, sockets=2, **extra):
    return subprocess.run([sys.executable, LAUNCH, "-n", str(n), "--sockets", str(sockets),
                           WORKER, scenario], env=env(**extra), capture_output=True, text=True,
                          timeout=timeout)


def ok(p, n, scenario):
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(n):
        assert f"[{r}] rank" in p.stdout, p.stdout


@pytest.mark.parametrize("n", [2, 3, 4])
def test_collectives_against_numpy(n):
    p = launch(n, "matrix", sockets=2 if n < 4 else 1)
    ok(p, n, "matrix")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_send_recv_between_any_ranks(n):
    ok(launch(n, "p2p"), n, "p2p")


@pytest.mark.parametrize("n", [3, 4])
def test_split_close_health(n):
    ok(launch(n, "split"), n, "split")


def free_ports(k):
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def start_ranks(n, scenario, **extra):
    ports = free_ports(n)
    tmp = tempfile.mkdtemp()
    hf = os.path.join(tmp, "hosts.json")
    with open(hf, "w") as f:
        json.dump([[f"127.0.0.1:{p}"] for p in ports], f)
    procs = [subprocess.Popen([sys.executable, WORKER, scenario],
                              env=env(MLX_RANK=str(r), MLX_HOSTFILE=hf, **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    return procs, ports, hf


@pytest.mark.parametrize("how,n", [("kill", 2), ("kill", 3), ("stop", 3)])
def test_lost_peer_is_reported_in_time(how, n):
    """SIGKILL: every other rank fails within 1 s naming a rank; SIGSTOP: within the timeout
    (NUVEC_DIST_TIMEOUT=1 here). The times are printed (pytest -s shows them)."""
    procs, _, _ = start_ranks(n, "lost-" + how, NUVEC_DIST_TIMEOUT="1")
    try:
        outs = []
        for p in procs[:-1]:
            out, _ = p.communicate(timeout=30)
            outs.append(out)
            assert p.returncode == 0, out
        print("".join(outs))
        for out in outs:
            assert "lost peer detected after" in out, out
    finally:
        last = procs[-1]
        last.kill()
        last.wait()


def test_a_busy_peer_is_waited_for():
    p = launch(3, "busy", NUVEC_DIST_TIMEOUT="1")
    ok(p, 3, "busy")


def header(dtype, shape, nbytes):
    name = dtype.encode()
    h = b"nuvecsnd" + struct.pack("<QQ", nbytes, len(name)) + name
    h += struct.pack("<Q", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
    return h + bytes(512 - len(h))


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        assert k, "closed"
        b += k
    return b


def test_send_header_layout_and_bad_headers():
    """A raw socket peer plays rank 1 of a 2-rank ring (one data socket and the heartbeat
    socket, whose silence does not matter within the default timeout): it sends a message without the tag (the
    recv fails at once), one with another dtype and shape (the recv drains it and fails naming
    both), then a good one; then it checks the exact 512-byte header of rank 0's send."""
    ports = free_ports(2)
    tmp = tempfile.mkdtemp()
    hf = os.path.join(tmp, "hosts.json")
    with open(hf, "w") as f:
        json.dump([[f"127.0.0.1:{ports[0]}"], [f"127.0.0.1:{ports[1]}"]], f)
    p = subprocess.Popen([sys.executable, WORKER, "header"],
                         env=env(NUVEC_RANK="0", NUVEC_HOSTFILE=hf), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", ports[0]))
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        s.sendall(struct.pack("<III", 0x6E757672, 1, 0))  # hello: magic, rank 1, socket 0
        hb = socket.create_connection(("127.0.0.1", ports[0]))
        hb.sendall(struct.pack("<III", 0x6E757672, 1, 1))  # the pair's heartbeat socket
        s.sendall(b"notaheader" + bytes(502))
        bad = np.arange(12, dtype=np.int16)
        s.sendall(header("int16", (3, 4), bad.nbytes) + bad.tobytes())
        good = np.array([1.5, -2.0], np.float32)
        s.sendall(header("float32", (2,), good.nbytes) + good.tobytes())
        h = recv_exact(s, 512)
        assert h == header("int64", (2, 3), 48)
        assert np.frombuffer(recv_exact(s, 48), np.int64).tolist() == list(range(6))
        out, _ = p.communicate(timeout=20)
        assert p.returncode == 0, out
        s.close()
        hb.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_launcher_ends_the_job_when_a_rank_fails():
    code = ("import os, sys, time\n"
            "r = int(os.environ['NUVEC_RANK'])\n"
            "print('hello from', r, flush=True)\n"
            "time.sleep(1.0)  # every rank has printed by then\n"
            "sys.exit(3) if r == 1 else time.sleep(30)\n")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, LAUNCH, "-n", "3", "--grace", "0.5", sys.executable,
                        "-c", code], capture_output=True, text=True, timeout=20)
    assert time.monotonic() - t0 < 10
    assert p.returncode == 3, p.stdout + p.stderr
    assert "nuvec-launch: rank 1 failed (status 3)" in p.stderr
    for r in range(3):
        assert f"[{r}] hello from {r}" in p.stdout, p.stdout


def test_launcher_hostfile_over_ssh(tmp_path):
    """--hostfile starts each rank through `ssh host command`: here a stand-in ssh on PATH that
    runs the command locally, so the remote command line (cd, hostfile, environment) is what
    runs."""
    fake = tmp_path / "ssh"
    fake.write_text("#!/bin/sh\nshift\nexec sh -c \"$1\"\n")
    fake.chmod(0o755)
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([{"ssh": "hostA", "ips": ["127.0.0.1"]},
                                 {"ssh": "hostB", "ips": ["127.0.0.1"]}]))
    base = 20000 + (os.getpid() * 7) % 30000
    e = env(PATH=f"{tmp_path}:{os.environ['PATH']}")
    p = subprocess.run([sys.executable, LAUNCH, "--hostfile", str(hosts), "--sockets", "1",
                        "--starting-port", str(base), WORKER, "split"], env=e,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("split ok") == 2, p.stdout


def test_init_without_configuration_is_the_size_1_group():
    code = ("import sys; sys.path.insert(0, %r); import worker as w, ctypes as C\n"
            "g = w.G(5); assert w.lib.nv_dist_init(b'any', False, C.byref(g)) == 0; "
            "assert g.value == 0\n"
            "assert w.lib.nv_dist_init(b'ring', True, C.byref(g)) != 0\n"
            "assert 'not configured' in w.lib.nv_last_error().decode()\n"
            "assert w.lib.nv_dist_init(b'mpi', True, C.byref(g)) != 0\n"
            "print(w.lib.nv_last_error().decode())\n") % HERE
    e = env()
    for k in ("MLX_RANK", "MLX_HOSTFILE", "NUVEC_RANK", "NUVEC_HOSTFILE"):
        e.pop(k, None)
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=20)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "MPI not found" in p.stdout or "mpi" in p.stdout.lower(), p.stdout


def test_charlm_data_parallel_matches_one_process(tmp_path):
    """examples/charlm --distributed on 2 ranks reports the losses of one process at the same
    global batch (each rank takes half the rows; gradients and loss averaged with all_sum)."""
    lib = env()["NUVEC_LIB"]
    charlm = os.path.join(os.path.dirname(os.path.dirname(lib)), "examples", "charlm")
    if not os.access(charlm, os.X_OK):
        pytest.skip("examples/charlm is not built")
    data = os.path.join(ROOT, "examples", "charlm", "data", "shakespeare.txt")
    args = ["--tiny", "--device", "cpu", "--steps", "4", "--batch", "4", "--eval-every", "0",
            "--sample-chars", "0", "--data", data]

    def losses(out):
        return [line.split("loss ")[1].split()[0] for line in out.splitlines()
                if line.startswith("step ") and "/" in line.split()[1]]

    one = subprocess.run([charlm, *args, "--out", str(tmp_path / "one")], capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 0, one.stdout + one.stderr
    two = subprocess.run([sys.executable, LAUNCH, "-n", "2", charlm, *args, "--distributed",
                          "--out", str(tmp_path / "two")], env=env(), capture_output=True,
                         text=True, timeout=120)
    assert two.returncode == 0, two.stdout + two.stderr
    want = losses(one.stdout)
    assert len(want) == 4, one.stdout
    for r in range(2):
        got = losses("\n".join(l[4:] for l in two.stdout.splitlines() if l.startswith(f"[{r}] ")))
        assert got == want, (r, got, want)
