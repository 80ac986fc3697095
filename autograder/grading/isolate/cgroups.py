"""One cgroup per sandboxed kernel: its own CPU set, memory limit and process limit.

``taskset`` and ``prlimit`` are advice a process can undo or share: ``sched_setaffinity``
widens a CPU mask again, and ``RLIMIT_NPROC`` counts every process of a uid, so all sandboxes
running as uid 65534 share one budget (and a grader running as non-root sets none). A cgroup
is a limit the sandbox cannot leave: a kernel in a one-CPU cpuset stays on that CPU whatever
it asks, its memory (tmpfs pages it writes included) is charged to its own group, and its
process count is its own.

Whichever hierarchy the host has is used: cgroup v2 where the unified hierarchy offers the
``cpuset``, ``memory`` and ``pids`` controllers, otherwise v1's separate ``cpuset``,
``memory`` and ``pids`` hierarchies. Where neither can be written (no root, no controllers),
:func:`available` says why and the grader falls back to ``taskset``/``prlimit`` with a warning.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpuset", "memory", "pids")
PARENT = "pte-grading"


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path in that hierarchy, from /proc/self/cgroup."""
    found = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            found[name] = path
    return found


def _v2_root() -> Path | None:
    for candidate in (ROOT, ROOT / "unified"):
        controllers = candidate / "cgroup.controllers"
        if controllers.is_file() and set(CONTROLLERS) <= set(controllers.read_text().split()):
            return candidate
    return None


@functools.lru_cache(maxsize=None)
def available() -> tuple[str | None, str]:
    """("v2" or "v1", "") when per-kernel groups can be made here, else (None, why not)."""
    if os.geteuid() != 0:
        return None, "the grader is not root, so it cannot create cgroups"
    own = _own_paths()
    if _v2_root() is not None:
        base = _v2_root() / own.get("", "/").lstrip("/") / PARENT
        try:
            base.mkdir(exist_ok=True)
            (base.parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
            return "v2", ""
        except OSError as exc:
            v2_problem = f"cgroup v2 is not writable here ({exc.strerror})"
    else:
        v2_problem = "the cgroup v2 hierarchy has no cpuset, memory and pids controllers"
    try:
        for controller in CONTROLLERS:
            base = _v1_base(controller, own)
            base.mkdir(exist_ok=True)
            if controller == "cpuset":
                _copy_cpuset(base.parent, base)
        return "v1", ""
    except OSError as exc:
        return None, f"{v2_problem}, and cgroup v1's {', '.join(CONTROLLERS)} are not writable ({exc.strerror})"


def _v1_base(controller: str, own: dict[str, str]) -> Path:
    mount = ROOT / controller
    if not (mount / "cgroup.procs").is_file():
        raise FileNotFoundError(2, f"no cgroup v1 {controller} hierarchy at {mount}")
    return mount / own.get(controller, "/").lstrip("/") / PARENT


def _copy_cpuset(parent: Path, child: Path) -> None:
    for name in ("cpuset.cpus", "cpuset.mems"):
        if not (child / name).read_text().strip():
            (child / name).write_text((parent / name).read_text().strip())


@dataclass
class KernelGroups:
    """The groups of one kernel; ``procs`` are the files a process writes its pid to, to join them."""
    folders: list[Path]
    procs: list[Path]
    memory: Path

    def oom_killed(self) -> bool:
        """Did the memory limit kill a process of this kernel?"""
        for name in ("memory.events", "memory.oom_control"):
            path = self.memory / name
            if path.is_file():
                for line in path.read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value or 0) > 0:
                        return True
        return False

    def remove(self) -> None:
        """Kill what is left in the groups and remove them."""
        for folder in self.folders:
            for _attempt in range(50):
                try:
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _sweep(parent: Path) -> None:
    """Remove groups a grader left behind: named "<pid>-...", and that pid is gone (a live grader's stay)."""
    try:
        entries = [entry for entry in parent.iterdir() if entry.is_dir()]
    except OSError:
        return
    for entry in entries:
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                entry.rmdir()
            except OSError:   # still has processes, or already gone
                pass


def create(name: str, cpus: str, memory_bytes: int, processes: int) -> KernelGroups | None:
    """Groups for one kernel (``cpus`` a cpuset list such as "1"; "" keeps all), or None if unavailable."""
    kind, _ = available()
    if kind is None:
        return None
    own = _own_paths()
    if kind == "v2":
        folder = _v2_root() / own.get("", "/").lstrip("/") / PARENT / name
        _sweep(folder.parent)
        folder.mkdir()
        if cpus:
            (folder / "cpuset.cpus").write_text(cpus)
        (folder / "memory.max").write_text(str(memory_bytes))
        (folder / "memory.swap.max").write_text("0") if (folder / "memory.swap.max").exists() else None
        (folder / "pids.max").write_text(str(processes))
        return KernelGroups([folder], [folder / "cgroup.procs"], folder)
    folders = {controller: _v1_base(controller, own) / name for controller in CONTROLLERS}
    for folder in folders.values():
        _sweep(folder.parent)
        folder.mkdir()
    _copy_cpuset(folders["cpuset"].parent, folders["cpuset"])
    if cpus:
        (folders["cpuset"] / "cpuset.cpus").write_text(cpus)
    (folders["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
    (folders["pids"] / "pids.max").write_text(str(processes))
    return KernelGroups(list(folders.values()), [f / "cgroup.procs" for f in folders.values()], folders["memory"])
