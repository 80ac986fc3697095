"""A throwaway PostgreSQL server on loopback, from Debian's packages (tools/system-deps.sh installs them).

Used by the tests of several graders sharing one gradebook (tests/e2e/test_grading_postgres.py,
tests/e2e/test_slurm.py). The server lives in a scratch folder and is stopped and removed at the end.
"""
from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


class Unavailable(RuntimeError):
    """PostgreSQL is not installed, or its server did not start; the message says which."""


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    """A free TCP port for a test server, below the kernel's ephemeral range (32768 and up on Linux).

    Kernels pick their ports from that range (jupyter_client binds port 0 and lets go), so a server given a
    port from it could take one that a kernel starting at the same moment has just chosen ("Address already
    in use" in another test's kernel). Below it, only servers started by these tests compete, and each port
    is checked free before it is returned."""
    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port between 20000 and 32000")


@contextlib.contextmanager
def postgres_server(database: str = "gradebook"):
    """Yield the SQLAlchemy URL of an empty database on a fresh server."""
    bindir = pg_bin()
    if bindir is None:
        raise Unavailable("PostgreSQL is not installed: run `bash tools/system-deps.sh` as root (make test does)")
    base = Path(tempfile.mkdtemp(prefix="pte-pg-"))  # pytest's tmp is private to root; postgres must enter
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    try:
        try:
            subprocess.run(as_user + [str(bindir / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres"],
                           check=True, capture_output=True)
            subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                                      f"-p {port} -k {sock} -c listen_addresses=127.0.0.1", "start"],
                           check=True, capture_output=True, timeout=120)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            log = (base / "log").read_text(errors="replace")[-2000:] if (base / "log").exists() else ""
            raise Unavailable(f"PostgreSQL did not start: {exc}\n{getattr(exc, 'stderr', '') or ''}{log}") from None
        subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database],
                       check=True, capture_output=True)
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{database}"
    finally:
        subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
