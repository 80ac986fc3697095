"""Where submitted code runs: a kernel inside bubblewrap, as an unprivileged user, with limits.

What holds when bubblewrap works (``sandbox_available()``):
- the kernel sees a read-only view of the system, the Python installation, the venv, the
  ``autograder`` package and ``data/``; a private, writable work folder; nothing else of
  the course: not ``solutions/``, not the gradebook, not other students' folders;
- it runs as uid/gid 65534 (nobody) in its own user, PID, IPC, UTS and network
  namespaces: no network at all, no view of other processes;
- ``prlimit`` caps its data segment (memory), file size, core dumps and open files;
- the grader talks to it over Unix sockets in a folder shared with it alone.
Without bubblewrap (``--sandbox none``) only the limits and the separate process remain.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder import course

NOBODY = 65534


@functools.lru_cache(maxsize=None)
def sandbox_available() -> bool:
    """True when bubblewrap can make the namespaces here (probed once per process)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-all", "--uid", str(NOBODY),
                            "--gid", str(NOBODY), "--dev", "/dev", "--proc", "/proc", "true"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def _readonly_roots() -> list[str]:
    roots = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives", "/etc/ssl",
             "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
             "/etc/fonts"]
    roots += [sys.base_prefix, sys.prefix, str(course.REPO_ROOT / "autograder"), str(course.data_dir())]
    # the venv's interpreter may be a symlink chain into another prefix
    roots.append(str(Path(os.path.realpath(sys.executable)).parent.parent))
    seen, unique = set(), []
    for root in roots:
        if root not in seen and os.path.exists(root):
            seen.add(root)
            unique.append(root)
    return unique


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def running_as_root() -> bool:
    return os.geteuid() == 0


def command_prefix(work_dir: Path, runtime_dir: Path, memory_mb: int, use_bwrap: bool) -> list[str]:
    """The command that wraps the kernel's own command line."""
    limits = ["prlimit", f"--data={memory_mb * 1024 * 1024}", f"--fsize={512 * 1024 * 1024}",
              "--core=0", "--nofile=1024", "--"]
    if not use_bwrap:
        return limits
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not running_as_root():
        args += ["--unshare-user"]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    made = {"/tmp"}
    for target in _readonly_roots() + [str(work_dir), str(runtime_dir)]:
        for parent in _ancestors(target):
            if parent not in made and not any(parent == r or parent.startswith(r + "/") for r in _readonly_roots()):
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        made.add(target)
    for root in _readonly_roots():
        args += ["--ro-bind", root, root]
    args += ["--bind", str(work_dir), str(work_dir), "--bind", str(runtime_dir), str(runtime_dir),
             "--chdir", str(work_dir),
             # inside the PID namespace the kernel's parent is PID 1: stop ipykernel from
             # taking that for an orphaned kernel (--die-with-parent covers the real case)
             "--setenv", "JPY_PARENT_PID", "1", "--"]
    if running_as_root():
        # Drop to a real unprivileged user inside the namespaces: no capability survives.
        args += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs"]
    return limits + args


def prepare_dirs(base: Path) -> tuple[Path, Path]:
    """A work folder and a runtime (socket) folder that the sandboxed user may write."""
    work, runtime = base / "work", base / "run"
    for folder in (work, runtime):
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(folder, NOBODY, NOBODY)
        folder.chmod(0o700)
    return work, runtime


def kernel_env(work_dir: Path, threads: int) -> dict[str, str]:
    """A small, explicit environment: no credentials or course paths leak in from the grader."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work_dir),
        "LANG": "C.UTF-8",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "MPLCONFIGDIR": str(work_dir / ".matplotlib"),
        "PYTHONWARNINGS": "ignore",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PTE_DATA_DIR": str(course.data_dir()),
        "NBGRADER_EXECUTION": "autograde",
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    return env
