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
2. **PID 1** (``_init``): unshares mount, IPC, UTS, network and cgroup namespaces, then makes the kernel's file
   system (``autograder.warm.rootfs.build_root``: the cold sandbox's mounts, each with the flags bubblewrap
   gives it, and ``pivot_root`` into them). It forks the kernel, drops as the kernel does, reaps orphans and
   exits when the kernel ends, which ends every process left in the namespace. It dies with the relay (so with
   the template, and with the grading worker that owns the template);
3. the **kernel**: its own session, then ``drop``: the limits (``RLIMIT_DATA``, ``FSIZE``, ``CORE``,
   ``NOFILE``, ``NPROC`` where no pids cgroup counts), the CPU set, uid/gid 65534 with no supplementary
   groups, every capability dropped from the bounding and ambient sets, ``no_new_privs``, a parent-death
   signal and a check that ``CapEff`` is 0. ``PR_SET_DUMPABLE`` is set back to 1, as ``execve`` sets it for
   a cold kernel (only processes of its own namespace could use it). Only then does it become the kernel.

This module holds the three processes and the drop; the new root is ``autograder.warm.rootfs``, and every system
call that ``os`` lacks goes through ``autograder.warm.syscalls``.

Test hook: ``PTE_WARM_TEST_NO_ISOLATION=1`` in the template's environment skips the per-child step: the
child becomes the kernel on the host, as root (the design "without the per-child step" that
tests/e2e/test_warm_isolation.py shows to be unsafe).
"""
from __future__ import annotations

import os
import platform
import resource
import select
import shutil
import signal

from autograder.grading.isolate.policy import Policy, warm_namespace_flags
from autograder.grading.messages import KernelStarted, MessageError, SandboxFailed, SandboxReady, decode_one_of
from autograder.warm import rootfs, syscalls
from autograder.warm.syscalls import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    SYS_PIVOT_ROOT,
    IsolationError,
)

TEST_HOOK = "PTE_WARM_TEST_NO_ISOLATION"


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends (a uid change clears it: set it after one)."""
    syscalls.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


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
    syscalls.unshare(relay_flags, "unshare(CLONE_NEWPID)")
    syscalls.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def enter_init(sandbox: Policy) -> None:
    """PID 1's steps before it forks the kernel: death with the relay, the other namespaces, the file system."""
    syscalls.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    syscalls.unshare(warm_namespace_flags(sandbox)[1])
    rootfs.build_root(sandbox)


def enter_kernel(sandbox: Policy) -> None:
    """The kernel's steps before it becomes the kernel: its own session, the drop, death with PID 1 (set after
    the uid change, which clears it), its work folder."""
    os.setsid()
    drop(sandbox)
    syscalls.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
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
        syscalls.prctl(PR_SET_DUMPABLE, 0)   # the kernel's processes share its uid: none may ptrace PID 1
        syscalls.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # cleared by drop's uid change
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
            syscalls.prctl(PR_CAPBSET_DROP, cap)
        syscalls.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if sandbox.no_new_privs:
        syscalls.prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.setresuid(sandbox.uid, sandbox.uid, sandbox.uid)   # without SECBIT_KEEP_CAPS this clears the permitted set
    if sandbox.drop_capabilities:
        syscalls.clear_capabilities()
    syscalls.prctl(PR_SET_DUMPABLE, 1)
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
