"""Where submitted code runs: a kernel inside bubblewrap, as an unprivileged user, with limits.

What holds when bubblewrap works (``sandbox_available()``):
- the kernel sees a read-only view of the system, the Python installation, the venv, the
  kernel side of the package (``autograder/kernel``, and ``autograder/__init__.py``) and
  ``data/``; nothing else of the course: not the grader, not ``solutions/`` or its
  reference observations, not the gradebook, not other students' folders;
- its work folder and ``/tmp`` are size-capped tmpfs mounts private to it, and so (when the grader runs
  as root) is the runtime folder it shares with the grader: nothing it writes reaches the host's disk,
  and with cgroups every tmpfs page it writes counts towards its memory limit;
- it runs as uid/gid 65534 (nobody) in its own user, PID, IPC, UTS and network
  namespaces: no network at all, no view of other processes;
- ``prlimit`` caps its data segment (memory), file size, core dumps and open files; its processes are
  capped by its own cgroup (``pids.max``) where the host has one, else by RLIMIT_NPROC: inside the
  sandbox's own user namespace when the grader is not root (a cap per sandbox), for uid 65534 as a
  whole when it is (shared by the sandboxes running at once); ``taskset`` pins
  it to its own cores, so a CPU hog slows nobody else;
- the grader talks to it over Unix sockets in a folder shared with it alone.
Without bubblewrap (``--sandbox none``) only the limits and the separate process remain.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.grading.isolate.policy import NOBODY, Policy, cold_command, unsandboxed_command
from autograder.kernel import paths

# fixed limits of every sandbox (the engine's other fixed limits are in plan/settings.py)
RUNTIME_MB = 16                   # the runtime tmpfs (connection file and sockets: a few kB)
PRLIMIT_FSIZE_MB = 512            # largest file a kernel may write
PRLIMIT_NOFILE = 1024             # open files per kernel process


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


def kernel_package() -> Path:
    """The ``autograder.kernel`` every grading kernel imports: the one beside the grader's own code, whichever
    checkout that is (the grader may run from a second checkout with the first one's venv, whose editable install
    names the first). The sandbox binds it read-only at its own path, and :func:`kernel_env` puts its checkout
    first on the kernel's ``PYTHONPATH``, ahead of any editable install's finder."""
    return paths.PACKAGE_ROOT / "autograder" / "kernel"


def kernel_import_problem(threads: int = 1) -> str | None:
    """Why a grading kernel would not import :func:`kernel_package`, or None: the kernel's Python, with the
    kernel's environment, in an empty folder, asked where ``autograder.kernel`` is (not run). Checked once before
    a class is graded: every kernel of a class that failed here would die before it answered."""
    expected = kernel_package() / "__init__.py"
    with tempfile.TemporaryDirectory(prefix="pte-import-check-") as empty:
        try:
            probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                                    "print(u.find_spec('autograder.kernel').origin)"],
                                   env=kernel_env(Path(empty), threads), cwd=empty, capture_output=True, text=True,
                                   timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the kernels' Python ({sys.executable}) could not be asked where autograder.kernel is: {exc}"
    found = probe.stdout.strip().splitlines()[-1:] if probe.returncode == 0 else []
    if not found:
        why = (probe.stderr.strip().splitlines() or ["no answer"])[-1]
        return f"the kernels' Python ({sys.executable}) cannot find autograder.kernel ({why})"
    if os.path.realpath(found[0]) != os.path.realpath(expected):
        return (f"the kernels' Python ({sys.executable}) would import autograder.kernel from "
                f"{Path(found[0]).parent}, but the sandbox shows {expected.parent}, beside the grader's own code; "
                "run the grader from the checkout its venv was installed from, or reinstall the venv "
                "(pip install -e .) for this one")
    return None


def _readonly_roots() -> list[str]:
    roots = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives", "/etc/ssl",
             "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
             "/etc/fonts"]
    package = paths.PACKAGE_ROOT / "autograder"
    roots += [sys.base_prefix, sys.prefix, str(package / "__init__.py"), str(package / "kernel"),
              str(paths.data_dir())]
    # the venv's interpreter may be a symlink chain into another prefix
    roots.append(str(Path(os.path.realpath(sys.executable)).parent.parent))
    seen, unique = set(), []
    for root in roots:
        if root not in seen and os.path.exists(root):
            seen.add(root)
            unique.append(root)
    return unique


def running_as_root() -> bool:
    return os.geteuid() == 0


def _process_cap(extra: int) -> int:
    """RLIMIT_NPROC counts every process of the user: leave room for what that user already runs."""
    uid = NOBODY if running_as_root() else os.geteuid()
    try:
        import psutil

        mine = sum(1 for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid)
    except Exception:  # psutil missing or /proc unreadable: a generous fixed cap
        mine = 0
    return mine + extra


def policy(work_dir: Path, runtime_dir: Path, limits, cgroup_procs: list[str] | None = None,
           cgroup: bool = False) -> Policy:
    """This kernel's sandbox (``limits``: a settings.Limits), the one description both mechanisms derive their
    steps from (policy.py). With ``cgroup`` (or ``cgroup_procs``) the kernel has groups of its own (cgroups.py):
    its process limit is ``pids.max`` there, not RLIMIT_NPROC."""
    counted = cgroup or bool(cgroup_procs)
    if counted:
        nproc = None
    elif running_as_root():
        nproc = _process_cap(limits.processes)   # per uid 65534: what it runs already, plus this kernel's share
    else:
        nproc = limits.processes   # inside bubblewrap's user namespace: this sandbox's processes only
    mpl = limits.mpl_cache if limits.mpl_cache and os.path.isdir(limits.mpl_cache) else ""
    return Policy(work=str(work_dir), runtime=str(runtime_dir), roots=tuple(_readonly_roots()),
                  disk_bytes=limits.disk_mb * 1024 * 1024, data_bytes=limits.memory_mb * 1024 * 1024,
                  fsize_bytes=PRLIMIT_FSIZE_MB * 1024 * 1024, nofile=PRLIMIT_NOFILE, nproc=nproc,
                  cpus=limits.cpus or "", mpl_cache=mpl, cgroup_procs=tuple(cgroup_procs or ()))


def command_prefix(work_dir: Path, runtime_dir: Path, limits, cgroup_procs: list[str] | None = None) -> list[str]:
    """The command that wraps a cold kernel's own command line (``limits``: a settings.Limits): the policy's
    cold translation, or without a sandbox (``--sandbox none``) what is left of the same policy (its cgroups,
    CPU set and rlimits). ``cgroup_procs``: the ``cgroup.procs`` of the kernel's own groups. PolicyError where the
    policy cannot be applied here (a CPU set without taskset): the kernel must not start."""
    have_taskset = shutil.which("taskset") is not None
    kernel_policy = policy(work_dir, runtime_dir, limits, cgroup_procs)
    if limits.sandbox:
        return cold_command(kernel_policy, running_as_root(), have_taskset=have_taskset)
    return unsandboxed_command(kernel_policy, have_taskset=have_taskset)


def warm_spec(work_dir: Path, runtime_dir: Path, limits, cgroup_procs: list[str]) -> dict:
    """What a warm child builds for itself (autograder.warm.isolate): the same policy as a cold kernel's, as the
    message that travels to the template."""
    return policy(work_dir, runtime_dir, limits, cgroup_procs).to_message()


def prepare_dirs(base: Path) -> tuple[Path, Path]:
    """A work folder and a runtime (socket) folder that the sandboxed user may write."""
    work, runtime = base / "work", base / "run"
    for folder in (work, runtime):
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(folder, NOBODY, NOBODY)
        folder.chmod(0o700)
    return work, runtime


def cap_runtime(runtime: Path) -> str:
    """Put the runtime folder (the one folder the kernel shares with the grader) on a small tmpfs of its
    own, so that nothing the kernel writes there reaches the host's disk; the pages it writes are charged
    to the kernel's memory cgroup. Returns "" when done, else why not (mounting needs root)."""
    if not running_as_root():
        return "the runtime folder is a host folder (mounting a tmpfs needs root)"
    options = f"size={RUNTIME_MB}m,mode=0700,uid={NOBODY},gid={NOBODY},nosuid,nodev,noexec"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "pte-runtime", str(runtime)],
                          capture_output=True, text=True)
    return "" if done.returncode == 0 else f"the runtime folder is a host folder ({done.stderr.strip()[:200]})"


def release_runtime(runtime: Path) -> None:
    subprocess.run(["umount", "-l", str(runtime)], capture_output=True)


def release_mounts_under(folder: Path) -> list[str]:
    """Unmount every runtime tmpfs left under ``folder``: a grading process that was killed (the OOM
    killer, a crash) never reached its own clean-up. Returns the mount points released."""
    root = os.path.realpath(folder) + os.sep
    try:
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts if line.startswith("pte-runtime ")]
    except OSError:
        return []
    # /proc/self/mounts escapes spaces and the like as octal; scratch folders have none
    left = [point for point in points if point.startswith(root)]
    for point in sorted(left, reverse=True):
        release_runtime(Path(point))
    return left


# CPU-dispatch settings of torch, MKL and oneDNN: they choose the vector code a kernel runs (and so its
# rounding). Where the grader's environment sets them, every kernel gets them: the solution's reference run
# and the students' kernels alike (this is also how the tests emulate an older CPU).
CPU_DISPATCH_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA",
                    "DNNL_MAX_CPU_ISA")


def cpu_dispatch_env() -> dict[str, str]:
    """The CPU-dispatch settings of the grader's own environment."""
    return {name: os.environ[name] for name in CPU_DISPATCH_ENV if os.environ.get(name)}


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
        # the autograder.kernel the sandbox shows, ahead of the venv's editable install (see kernel_package)
        "PYTHONPATH": str(paths.PACKAGE_ROOT),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PTE_DATA_DIR": str(paths.data_dir()),
        "NBGRADER_EXECUTION": "autograde",
        # hidden checks only record what the student's code produced; the grader judges
        "PTE_OBSERVE": "record",
        "JUPYTER_PLATFORM_DIRS": "1",
        **cpu_dispatch_env(),
    }
    return env
