"""The per-child step of a sandboxed warm kernel: what bubblewrap and setpriv do for a cold one, done in the
forked child before it runs anything of the student's.

The grading command's template runs as root on the host, with only the import-time variables of its key and
``PATH`` in its environment, and holds nothing but imported modules. For a request with a ``sandbox`` policy
(``autograder.grading.isolate.policy.Policy``, the one a cold kernel's command line is derived from, as its
message) the child it forks runs :func:`launch`, which makes three processes:

1. the **relay** (the forked child itself, outside): joins the kernel's cgroups (cpuset, memory, pids) while
   it still sees the host's hierarchy, unshares a PID namespace and forks its PID 1; it reports the kernel's
   host pid (``SandboxReady``) or why the sandbox could not be made (``SandboxFailed``; both messages of
   ``autograder.grading.messages``) on the template's pipe, waits for
   PID 1 and ends as it ended (``_relay``);
2. **PID 1** (``_init``): unshares mount, IPC, UTS, network and cgroup namespaces, then ``build_root``: a new
   root on a small tmpfs, ``/tmp`` first, the same read-only bind mounts as the cold sandbox's (system,
   Python, venv, ``autograder/kernel``, ``data/``) with every submount remounted read-only, a minimal
   ``/dev`` with its own ``/dev/shm`` and devpts, size-capped tmpfs mounts for ``/tmp``, ``/dev/shm`` and the
   work folder, the runtime folder bound from the host, the font cache read-only, a new ``/proc`` (only the
   namespace's processes, its ``sys``, ``sysrq-trigger``, ``irq`` and ``bus`` read-only), each mount with the
   flags bubblewrap gives it (tmpfs and binds nosuid, nodev; devices nosuid; read-only where asked),
   ``pivot_root`` with the old root detached, the new root remounted read-only and loopback up. It forks the
   kernel, drops as the kernel does, reaps orphans and exits when the kernel ends, which ends every process
   left in the namespace. It dies with the relay (so with the template, and with
   the grading worker that owns the template);
3. the **kernel**: its own session, then ``drop``: the limits (``RLIMIT_DATA``, ``FSIZE``, ``CORE``,
   ``NOFILE``, ``NPROC`` where no pids cgroup counts), the CPU set, uid/gid 65534 with no supplementary
   groups, every capability dropped from the bounding and ambient sets, ``no_new_privs``, a parent-death
   signal and a check that ``CapEff`` is 0. ``PR_SET_DUMPABLE`` is set back to 1, as ``execve`` sets it for
   a cold kernel (only processes of its own namespace could use it). Only then does it become the kernel.

Test hook: ``PTE_WARM_TEST_NO_ISOLATION=1`` in the template's environment skips the per-child step: the
child becomes the kernel on the host, as root (the design "without the per-child step" that
tests/e2e/test_warm_isolation.py shows to be unsafe).
"""
from __future__ import annotations

import ctypes
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import struct

from autograder.grading.isolate.policy import Policy, warm_mount_steps, warm_namespace_flags
from autograder.grading.messages import KernelStarted, MessageError, SandboxFailed, SandboxReady, decode_one_of

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAPABILITY_VERSION_3 = 0x20080522
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
ROOT_DIR = "/run/pte-warm-root"   # the mount point of each child's new root (in its own mount namespace)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
             ("stderr", "/proc/self/fd/2"), ("core", "/proc/kcore"), ("ptmx", "pts/ptmx"))
PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")
TEST_HOOK = "PTE_WARM_TEST_NO_ISOLATION"

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    """A step of the per-child sandbox failed: the child must not run the kernel."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise IsolationError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(arg3), 0, 0), f"prctl {option}")


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends (a uid change clears it: set it after one)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def available() -> str | None:
    """Why this process cannot host sandboxed children, or None."""
    if os.geteuid() != 0:
        return "the grader is not root (a child needs CAP_SYS_ADMIN to make its namespaces)"
    if platform.machine() not in SYS_PIVOT_ROOT:
        return f"no pivot_root number for {platform.machine()}"
    return None


def launch(message: dict, report: int, become) -> None:
    """In the child the template forked (its own session already): make the kernel's sandbox (``message``: a
    :class:`~autograder.grading.isolate.policy.Policy` as it travelled; one of another version is refused), start
    ``become()`` in it, and write to ``report`` ``SandboxReady`` (the kernel's host pid, once it runs as 65534 and
    leads its own session) or ``SandboxFailed``. This process (the relay) stays outside the kernel's namespaces,
    waits for them to end and exits as the kernel did. Never returns."""
    if os.environ.get(TEST_HOOK) == "1":   # the design without the per-child step: the kernel is this process
        os.write(report, SandboxReady(os.getpid()).encode())
        os.close(report)
        become()
        os._exit(0)
    try:
        sandbox = Policy.from_message(message)
        enter_relay(sandbox)
        ready_r, ready_w = os.pipe()
        life_r, life_w = os.pipe()   # PID 1 reads EOF here once the relay is gone
        init = os.fork()
    except Exception as error:  # nothing of the student's has run: the grader starts this kernel cold
        os.write(report, SandboxFailed.of(error).encode())
        os._exit(1)
    if init == 0:
        os.close(ready_r)
        os.close(report)
        os.close(life_w)
        _init(sandbox, ready_w, life_r, become)
    os.close(ready_w)
    os.close(life_r)
    answer = _init_answer(_read_all(ready_r))
    if isinstance(answer, KernelStarted):
        import psutil  # preloaded by the template

        kernels = [child.pid for child in psutil.Process(init).children()]
        answer = SandboxReady(kernels[0]) if len(kernels) == 1 else SandboxFailed("the kernel's host pid was not found")
    os.write(report, answer.encode())
    os.close(report)
    _relay(init, life_w)


def enter_relay(sandbox: Policy) -> None:
    """The relay's steps: its cgroups (joined before the cgroup namespace hides the host's groups), then only the
    PID namespace (it is the next child's: the relay keeps the host's mounts and /proc), and death with the
    template."""
    relay_flags, _ = warm_namespace_flags(sandbox)
    for procs in sandbox.cgroup_procs:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    _check(_libc.unshare(relay_flags), "unshare(CLONE_NEWPID)")
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def enter_init(sandbox: Policy) -> None:
    """PID 1's steps before it forks the kernel: death with the relay, the other namespaces, the file system."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _check(_libc.unshare(warm_namespace_flags(sandbox)[1]), "unshare")
    build_root(sandbox)


def enter_kernel(sandbox: Policy) -> None:
    """The kernel's steps before it becomes the kernel: its own session, the drop, death with PID 1 (set after
    the uid change, which clears it), its work folder."""
    os.setsid()
    drop(sandbox)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.chdir(sandbox.work)


def kernel_env(sandbox: Policy, env: dict[str, str]) -> dict[str, str]:
    """The environment a sandboxed kernel starts with: ``env`` with the policy's variables set and its leftovers
    unset (bubblewrap's ``--setenv`` and the cold shell line's ``unset`` do the same)."""
    env = {**env, **dict(sandbox.env)}
    for name in sandbox.unset_env:
        env.pop(name, None)
    return env


def _init_answer(raw: bytes) -> KernelStarted | SandboxFailed:
    """What PID 1 or the kernel wrote to the relay."""
    if not raw:
        return SandboxFailed("the sandbox's first process ended before the kernel started")
    try:
        return decode_one_of(raw, KernelStarted, SandboxFailed)
    except MessageError as error:
        return SandboxFailed(f"the sandbox's first process answered what the relay cannot read: {error}")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _init(sandbox: Policy, ready: int, life: int, become) -> None:
    """PID 1 of the kernel's namespaces: build the file system, fork the kernel, then reap as an init does
    (orphans of the student's code end up here) until the kernel ends, and end with it: every process left in
    the namespace dies then. Exits 128 + the signal when the kernel was killed by one.

    It dies with the relay (a parent-death signal, set again after ``drop``: a uid change clears it), so a
    grading worker that is killed takes its template, relay, PID 1 and kernel with it. ``life`` is the read
    end of a pipe only the relay writes to: EOF there means the relay ended before the signal was set."""
    try:
        enter_init(sandbox)
        kernel = os.fork()
    except Exception as error:
        os.write(ready, SandboxFailed.of(error).encode())
        os._exit(1)
    if kernel == 0:
        try:
            enter_kernel(sandbox)
        except Exception as error:
            os.write(ready, SandboxFailed.of(error).encode())
            os._exit(1)
        os.write(ready, KernelStarted().encode())
        os.close(ready)
        become()
        os._exit(0)
    os.close(ready)
    try:
        drop(sandbox)
        _prctl(PR_SET_DUMPABLE, 0)   # the kernel's processes share its uid: none may ptrace PID 1
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # cleared by drop's uid change
        if select.select([life], [], [], 0)[0]:   # the relay ended before: no signal will come
            raise IsolationError(0, "the relay ended")
    except Exception:
        os.kill(kernel, signal.SIGKILL)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == kernel:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)


def _relay(init: int, life: int) -> None:
    """The first child, outside the kernel's namespaces: wait for its PID 1, end as the kernel ended. It holds
    ``life``, the write end of PID 1's pipe, until it ends."""
    for fd in range(3, 1024):
        if fd != life:
            try:
                os.close(fd)
            except OSError:
                pass
    _, status = os.waitpid(init, 0)
    code = os.waitstatus_to_exitcode(status)
    if code > 128:   # the kernel was killed by signal code - 128 (see _init)
        if code - 128 not in (signal.SIGKILL, signal.SIGSTOP):   # these two have no handler to reset
            signal.signal(code - 128, signal.SIG_DFL)
        os.kill(os.getpid(), code - 128)
    os._exit(code & 0xFF)


def _bind(source: str, target: str, readonly: bool, devices: bool = False) -> None:
    """bubblewrap's bind: recursive, then the target and each submount remounted with the flags they had, plus
    nosuid, nodev (not for a device) and read-only when asked (a recursive bind keeps the submounts' own)."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    added = MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if readonly else 0)
    for point in [target, *_submounts(target)]:
        kept = os.statvfs(point).f_flag & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)   # ST_* == MS_* bits
        _mount(None, point, None, MS_REMOUNT | MS_BIND | kept | added)


def _submounts(target: str) -> list[str]:
    """The mount points below ``target`` (mountinfo writes a space, a tab, a newline and a backslash in octal)."""
    with open("/proc/self/mountinfo") as info:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in info]
    return [p for p in points if p.startswith(target.rstrip("/") + "/")]


def _tmpfs(target: str, size: int, mode: str = "1777") -> None:
    """bubblewrap's ``--tmpfs``: nosuid, nodev (executable, as bubblewrap has no option for noexec)."""
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")


def _loopback_up() -> None:
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        import fcntl

        name, flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0))[:18])
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", name, flags | IFF_UP))


def _dev(target: str) -> None:
    """bubblewrap's ``--dev``: a small tmpfs with the harmless devices bound from the host, the usual links, a
    devpts of its own and an empty ``shm``."""
    _tmpfs(target, 1 << 20, "0755")
    for device in DEVICES:
        if os.path.exists("/dev/" + device):
            _bind("/dev/" + device, f"{target}/{device}", readonly=False, devices=True)
    for name, link in DEV_LINKS:
        os.symlink(link, f"{target}/{name}")
    os.makedirs(f"{target}/shm", exist_ok=True)
    os.makedirs(f"{target}/pts", exist_ok=True)
    _mount("devpts", f"{target}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")


def _proc(target: str) -> None:
    """bubblewrap's ``--proc``: this namespace's processes only, and the parts of it that write to the host's
    kernel (where still writable) covered read-only."""
    os.makedirs(target, exist_ok=True)
    _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_COVERED:
        if os.access(f"{target}/{name}", os.W_OK):
            _mount(f"{target}/{name}", f"{target}/{name}", None, MS_BIND)
            _mount(None, f"{target}/{name}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def build_root(sandbox: Policy) -> None:
    """In PID 1 of the kernel's namespaces (still root): the file system the policy describes (a cold sandbox's
    kernel sees the same, from bubblewrap), made under a new root on a small tmpfs, in the policy's order; then
    ``pivot_root`` with the old root detached, the new root read-only and loopback up."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)   # nothing mounted from here on reaches the host
    os.makedirs(ROOT_DIR, mode=0o700, exist_ok=True)
    _mount("tmpfs", ROOT_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    new = ROOT_DIR
    for step in warm_mount_steps(sandbox):
        kind, target = step[0], new + (step[2] if step[0] == "bind" else step[1])
        if kind == "tmpfs":
            _tmpfs(target, step[2], step[3])
        elif kind == "bind":
            _bind(step[1], target, readonly=step[3])
        elif kind == "dev":
            _dev(target)
        elif kind == "proc":
            _proc(target)
        else:
            raise IsolationError(0, f"unknown mount step {kind!r}")
    os.makedirs(new + "/oldroot", exist_ok=True)
    _check(_libc.syscall(SYS_PIVOT_ROOT[platform.machine()], new.encode(), (new + "/oldroot").encode()),
           "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/oldroot", MNT_DETACH), "umount /oldroot")
    os.rmdir("/oldroot")
    if sandbox.readonly_root:
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _loopback_up()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _clear_capabilities() -> None:
    """capset(2): effective, permitted and inheritable all empty (setpriv's ``--inh-caps=-all`` for the last)."""
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), data), "capset")


def drop(sandbox: Policy) -> None:
    """In the kernel: its limits, then the policy's unprivileged user with no capability left."""
    for name, value in sandbox.rlimits().items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if sandbox.cpus:
        os.sched_setaffinity(0, _cpu_list(sandbox.cpus))
    os.setgroups([])
    os.setresgid(sandbox.gid, sandbox.gid, sandbox.gid)
    if sandbox.drop_capabilities:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
        for cap in range(last + 1):
            _prctl(PR_CAPBSET_DROP, cap)
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if sandbox.no_new_privs:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.setresuid(sandbox.uid, sandbox.uid, sandbox.uid)   # without SECBIT_KEEP_CAPS this clears the permitted set
    if sandbox.drop_capabilities:
        _clear_capabilities()
    _prctl(PR_SET_DUMPABLE, 1)
    with open("/proc/self/status") as status:
        sets = {line.split(":")[0]: int(line.split()[1], 16) for line in status if line.startswith("Cap")}
    left = sets if sandbox.drop_capabilities else {"CapEff": sets.get("CapEff", 1)}
    if any(left.values()) or len(sets) < 5 or os.getuid() != sandbox.uid:
        raise IsolationError(0, f"capabilities left after the drop: {sets}")


def copy_font_cache(message: dict, home: str) -> None:
    """What the cold sandbox's ``cp -r`` does: the font cache into the (empty) work folder, as 65534."""
    sandbox = Policy.from_message(message)
    if sandbox.mpl_cache and os.path.isdir(sandbox.mpl_target):
        shutil.copytree(sandbox.mpl_target, os.path.join(home, ".matplotlib"), dirs_exist_ok=True)


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus
