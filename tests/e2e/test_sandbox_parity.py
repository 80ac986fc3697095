"""One isolation policy, two mechanisms: what a kernel sees from inside its sandbox, cold and warm, compared.

A cold grading kernel is sandboxed by a command line (bubblewrap, setpriv, prlimit, taskset:
``grading/isolate/sandbox.py``); a warm one is forked from a template and its child makes the sandbox itself
(``warm/isolate.py``, ``warm/rootfs.py``). The same probe runs in both, through ``runner.execute`` (the grading
command's own path, cgroups included), and prints what it sees: uid and gids, every capability set, NoNewPrivs,
seccomp, rlimits, cgroup membership and limits, network interfaces, visible processes, the environment, the mounts
(normalised: each run's own folders become placeholders) and which paths it may write. Every property must be equal,
or be listed in ``KNOWN`` with the reason the difference is harmless (docs/grading.md, "Cold and warm sandboxes
compared", lists the same). A new difference, or a listed one that is gone, fails the test.

The comparison can fail: with the warm child's per-child step switched off (``PTE_WARM_TEST_NO_ISOLATION``, the
test hook of test_warm_isolation.py), the same probe sees a kernel running as root on the host, and the
comparison names those properties.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from autograder.grading.isolate import sandbox
from autograder.grading.plan.settings import Limits
from autograder.grading.run import runner
from autograder.grading.status import Status
from autograder.warm import isolate

pytestmark = pytest.mark.skipif(isolate.available() is not None or not sandbox.sandbox_available(),
                                reason=f"warm sandboxed kernels need root and bubblewrap here: {isolate.available()}")

PROBE = r'''
import json, os, re, resource, socket
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
def family():
    mine, pid = {os.getpid()}, os.getpid()
    while pid > 1:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        mine.add(pid)
    return mine
def writable(path):
    try:
        probe = os.path.join(path, ".pte-parity-probe")
        with open(probe, "w") as handle:
            handle.write("x")
        os.remove(probe)
        return True
    except OSError:
        return False
def mounts():
    found = []
    for line in open("/proc/self/mountinfo"):
        left, right = line.split(" - ")
        point, options = left.split()[4], left.split()[5]
        flags = sorted(set(options.split(",")) & {"ro", "nosuid", "nodev", "noexec"})
        found.append((point, right.split()[0], "ro" if "ro" in flags else "rw", ",".join(flags)))
    return sorted(found)
def cgroup_limits():
    found = {}
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        for controller in controllers.split(","):
            if controller in ("memory", "pids", "cpuset"):
                found[controller] = "own" if path not in ("/", "") else "root"
    return found
limits = {name: resource.getrlimit(getattr(resource, name))
          for name in ("RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_AS",
                       "RLIMIT_STACK", "RLIMIT_MEMLOCK")}
seen = {
    "uid": [os.getuid(), os.geteuid()], "gid": [os.getgid(), os.getegid()], "groups": sorted(os.getgroups()),
    **{key: status(key) for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")},
    "rlimits": {name: list(value) for name, value in limits.items()},
    "cgroups": cgroup_limits(),
    "network": sorted(name for _, name in socket.if_nameindex()),
    "processes outside the kernel's line": len([n for n in os.listdir("/proc") if n.isdigit()
                                                 and int(n) not in family()]),
    "pid 1 is the kernel's ancestor": 1 in family(),
    "hostname": socket.gethostname() != open("/proc/sys/kernel/hostname").read().strip() or "same",
    "environment": sorted(os.environ),
    "mounts": mounts(),
    "writable": {path: writable(path) for path in ("/", "/tmp", os.getcwd(), "/usr", "/etc", "/dev/shm", "/run",
                                                    "/var/tmp", os.path.dirname(json.__file__))},
    "cpus": len(os.sched_getaffinity(0)),
    "cwd": os.getcwd(),
}
print("PARITY=" + json.dumps(seen))
'''
# what differs between the two mechanisms, exactly, each with why that is harmless; docs/grading.md says the same.
# (Closed when this test first ran: the cold kernel kept a full bounding set, had a writable tmpfs root, no
# /dev/shm and its shell's PWD; sandbox.command_prefix now clears, remounts, mounts and unsets them.)
# (Closed with issue 47: the warm child now makes bubblewrap's devpts and read-only /proc folders, and its /dev,
# /dev/shm and bind mounts carry bubblewrap's flags: /dev/shm executable, nosuid and nodev on every bind; the
# mounts are compared with their nosuid, nodev and noexec flags.)
KNOWN: dict[str, tuple[object, str]] = {}


def limits(warm: bool) -> Limits:
    return Limits(timeout_s=120, cell_timeout_s=60, memory_mb=768, output_mb=2, threads=1, sandbox=True,
                  processes=128, disk_mb=64, warm=warm)


def probe(tmp_path: Path, warm: bool) -> dict:
    scratch = tmp_path / ("warm" if warm else "cold")
    scratch.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    run = runner.execute(nb, limits(warm), scratch)
    assert run.status == Status.GRADED and run.kernel_start == ("warm" if warm else "cold"), (
        run.status, run.reason, run.notes)
    text = "".join(out.get("text", "") for cell in run.nb.cells for out in cell.get("outputs", []))
    line = next((line for line in text.splitlines() if line.startswith("PARITY=")), None)
    assert line, f"the probe printed nothing to compare: {text[-2000:]}"
    return normalise(json.loads(line.split("=", 1)[1]), scratch)


def normalise(seen: dict, scratch: Path) -> dict:
    """Each run's own folders (its scratch and runtime folders, the kernel's work folder) as placeholders."""
    text = json.dumps(seen)
    text = text.replace(str(scratch), "<scratch>")
    text = text.replace(seen["cwd"], "<work>") if seen["cwd"] not in ("/", "") else text
    text = re.sub(r"(pte-[a-z-]*)[A-Za-z0-9_]{6,}", r"\1<id>", text)   # tempfile's random suffixes
    return json.loads(text)


def differences(cold: dict, warm: dict) -> dict[str, tuple]:
    found = {}
    for key in sorted(set(cold) | set(warm)):
        if cold.get(key) != warm.get(key):
            if isinstance(cold.get(key), list) and isinstance(warm.get(key), list):
                only_cold = [x for x in cold[key] if x not in warm[key]]
                only_warm = [x for x in warm[key] if x not in cold[key]]
                found[key] = ("cold only", only_cold, "warm only", only_warm)
            elif isinstance(cold.get(key), dict) and isinstance(warm.get(key), dict):
                found[key] = {k: (cold[key].get(k), warm[key].get(k)) for k in set(cold[key]) | set(warm[key])
                              if cold[key].get(k) != warm[key].get(k)}
            else:
                found[key] = (cold.get(key), warm.get(key))
    return found


def test_cold_and_warm_kernels_see_the_same_sandbox(tmp_path):
    cold, warm = probe(tmp_path, warm=False), probe(tmp_path, warm=True)
    found = differences(cold, warm)
    listed = {key: json.loads(json.dumps(expected)) for key, (expected, _) in KNOWN.items()}
    unexplained = {key: value for key, value in found.items() if json.loads(json.dumps(value)) != listed.get(key)}
    assert not unexplained, "cold and warm sandboxes differ:\n" + "\n".join(
        f"  {key}: {value}" for key, value in unexplained.items())
    gone = sorted(set(KNOWN) - set(found))
    assert not gone, f"listed as differing but now the same (remove from KNOWN and docs/grading.md): {gone}"


def test_the_comparison_sees_a_warm_child_without_its_sandbox(tmp_path, monkeypatch):
    cold = probe(tmp_path, warm=False)
    original = sandbox.kernel_env
    # the template's children skip the per-child step (a template of its own: the hook is part of its key)
    monkeypatch.setattr(sandbox, "kernel_env", lambda *a, **k: {**original(*a, **k), isolate.TEST_HOOK: "1"})
    warm = probe(tmp_path, warm=True)
    found = differences(cold, warm)
    assert {"uid", "CapEff", "network"} <= set(found), found
