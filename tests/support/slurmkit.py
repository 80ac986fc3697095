"""A throwaway single-node Slurm cluster on loopback, from Debian's packages (``slurm-wlm``, ``munge``;
tools/system-deps.sh installs them before ``make test``).

Everything lives in one scratch folder: a munge key and socket, a ``slurm.conf`` with ports of its own,
the controller's state and both daemons' logs. ``munged`` runs as the ``munge`` user, ``slurmctld`` and
``slurmd`` as root (the test needs root, as the grading sandbox does). Process tracking by process tree and
no task plugin (``proctrack/linuxproc``, ``task/none``), so no cgroup plugin is needed. The commands
(``sbatch``, ``squeue`` ...) find the cluster through ``SLURM_CONF``: :meth:`Cluster.env`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pgkit

DAEMONS = ("munged", "slurmctld", "slurmd")


class Unavailable(RuntimeError):
    """Slurm or munge is not installed, or a daemon did not start; the message says which and why."""


def missing_programs() -> list[str]:
    wanted = [*DAEMONS, "sbatch", "squeue", "scontrol", "scancel", "sinfo"]
    return [name for name in wanted if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]


def program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class Cluster:
    """A running cluster: ``env`` for its commands, ``run`` to call one, ``log`` to read a daemon's log."""

    def __init__(self, base: Path, cpus: int):
        self.base, self.cpus = base, cpus
        self.conf = base / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]

    def env(self, extra: dict | None = None) -> dict:
        return dict(os.environ, SLURM_CONF=str(self.conf), **(extra or {}))

    def run(self, *args: str, check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([program(args[0]), *args[1:]], env=kw.pop("env", None) or self.env(), text=True,
                              capture_output=True, check=check, timeout=timeout, **kw)

    def log(self, daemon: str) -> str:
        path = self.base / f"{daemon}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else f"({path} was never written)"

    def state(self, job: str) -> str:
        """The job's (or array task's) state as squeue, else scontrol, reports it; "" once Slurm forgot it."""
        shown = self.run("scontrol", "show", "job", "-o", job, check=False)
        for field in shown.stdout.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return ""

    def wait_until(self, job: str, states: set[str], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(job)
            if state in states or time.monotonic() > deadline:
                return state
            time.sleep(0.5)


def write_config(base: Path, node: str, cpus: int, ports: tuple[int, int]) -> str:
    lines = {
        "ClusterName": "pte",
        "SlurmctldHost": f"{node}(127.0.0.1)",
        "SlurmctldPort": ports[0],
        "SlurmdPort": ports[1],
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={base / 'munge' / 'munge.socket'}",
        "StateSaveLocation": base / "state",
        "SlurmdSpoolDir": base / "spool",
        "SlurmctldPidFile": base / "slurmctld.pid",
        "SlurmdPidFile": base / "slurmd.pid",
        "SlurmctldLogFile": base / "slurmctld.log",
        "SlurmdLogFile": base / "slurmd.log",
        "SlurmctldDebug": "info",
        "SlurmdDebug": "info",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "SwitchType": "switch/none",
        "MpiDefault": "none",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CPU",
        "SchedulerType": "sched/backfill",
        "JobAcctGatherType": "jobacct_gather/none",
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/none",
        "ReturnToService": 2,
        "JobRequeue": 1,
        "KillWait": 5,
        "MinJobAge": 3600,     # finished jobs stay visible to scontrol while the test looks at them
        "SchedulerParameters": "sched_interval=2",
        "SlurmdParameters": "config_overrides",   # the node is what this file says, whatever the host has
        "PlugStackConfig": base / "plugstack.conf",
    }
    text = "".join(f"{key}={value}\n" for key, value in lines.items())
    text += f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN\n"
    text += f"PartitionName=grading Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO\n"
    return text


def start_munged(base: Path) -> None:
    folder = base / "munge"
    folder.mkdir(mode=0o700)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for path in (folder, key):
        shutil.chown(path, "munge", "munge")
    command = ["runuser", "-u", "munge", "--", program("munged"), f"--key-file={key}",
               f"--socket={folder / 'munge.socket'}", f"--pid-file={folder / 'munged.pid'}",
               f"--log-file={folder / 'munged.log'}", f"--seed-file={folder / 'munged.seed'}", "--force"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise Unavailable(f"munged did not start (exit {proc.returncode}): {proc.stderr.strip()}")


def stop(pid_file: Path, timeout: float = 15) -> None:
    """Stop the daemon whose pid the file holds (only that process), SIGKILL if it lingers."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def cluster(cpus: int = 2, timeout: float = 60):
    """Start munged, slurmctld and slurmd; yield the :class:`Cluster` once its node is idle; stop them."""
    missing = missing_programs()
    if missing:
        raise Unavailable(f"Slurm is not installed (missing {', '.join(missing)}): run `bash tools/system-deps.sh` "
                          "as root (make test does), or apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        raise Unavailable("starting slurmctld and slurmd needs root; this test runs as uid "
                          f"{os.geteuid()}")
    base = Path(tempfile.mkdtemp(prefix="pte-slurm-"))
    base.chmod(0o755)   # munged (user munge) must reach its folder inside
    for folder in ("state", "spool"):
        (base / folder).mkdir()
    (base / "plugstack.conf").write_text("")
    box = Cluster(base, cpus)
    box.conf.write_text(write_config(base, box.node, cpus, (pgkit.free_port(), pgkit.free_port())))
    try:
        start_munged(base)
        for daemon, flags in (("slurmctld", ["-i"]), ("slurmd", ["-N", box.node])):
            proc = box.run(daemon, "-f", str(box.conf), *flags, check=False, timeout=60)
            if proc.returncode != 0:
                raise Unavailable(f"{daemon} did not start (exit {proc.returncode}): {proc.stderr.strip()}\n"
                                  f"{box.log(daemon)}")
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            shown = box.run("sinfo", "-h", "-N", "-o", "%T", check=False)
            state = (shown.stdout + shown.stderr).strip()
            if state.startswith("idle"):
                break
            time.sleep(0.5)
        else:
            raise Unavailable(f"the Slurm node did not become idle within {timeout:g} s (sinfo: {state!r})\n"
                              f"slurmctld: {box.log('slurmctld')}\nslurmd: {box.log('slurmd')}")
        yield box
    finally:
        with contextlib.suppress(Exception):   # this cluster's own jobs: nothing outlives the test
            box.run("scancel", "--full", "--user", "root", check=False, timeout=30)
            deadline = time.monotonic() + 30
            while box.run("squeue", "-h", check=False).stdout.strip() and time.monotonic() < deadline:
                time.sleep(0.5)
        for pid_file in (base / "slurmd.pid", base / "slurmctld.pid", base / "munge" / "munged.pid"):
            stop(pid_file)
        shutil.rmtree(base, ignore_errors=True)
