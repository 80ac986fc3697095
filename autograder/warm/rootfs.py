"""The file system of a sandboxed warm kernel, made by PID 1 of its namespaces (still root) before it forks the
kernel: what bubblewrap makes for a cold one, mount by mount, with the flags bubblewrap gives each.

:func:`build_root` makes a new root on a small tmpfs and, in the policy's order
(``autograder.grading.isolate.policy.warm_mount_steps``), ``/tmp`` first, the read-only bind mounts (system,
Python, venv, ``autograder/kernel``, ``data/``) with every submount remounted read-only, a minimal ``/dev`` with
its own ``/dev/shm`` and devpts, size-capped tmpfs mounts for ``/tmp``, ``/dev/shm`` and the work folder, the
runtime folder bound from the host, the font cache read-only, a new ``/proc`` (only the namespace's processes, its
``sys``, ``sysrq-trigger``, ``irq`` and ``bus`` read-only); tmpfs and binds nosuid, nodev, devices nosuid,
read-only where asked. Then ``pivot_root`` with the old root detached, the new root remounted read-only and
loopback up. Every system call goes through ``autograder.warm.syscalls``."""
from __future__ import annotations

import os
import re
import socket
import struct

from autograder.grading.isolate.policy import Policy, warm_mount_steps
from autograder.warm import syscalls
from autograder.warm.syscalls import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    IsolationError,
)

ROOT_DIR = "/run/pte-warm-root"   # the mount point of each child's new root (in its own mount namespace)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
             ("stderr", "/proc/self/fd/2"), ("core", "/proc/kcore"), ("ptmx", "pts/ptmx"))
PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")


def build_root(sandbox: Policy) -> None:
    """In PID 1 of the kernel's namespaces (still root): the file system the policy describes (a cold sandbox's
    kernel sees the same, from bubblewrap), made under a new root on a small tmpfs, in the policy's order; then
    ``pivot_root`` with the old root detached, the new root read-only and loopback up."""
    syscalls.mount(None, "/", None, MS_REC | MS_PRIVATE)   # nothing mounted from here on reaches the host
    os.makedirs(ROOT_DIR, mode=0o700, exist_ok=True)
    syscalls.mount("tmpfs", ROOT_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
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
    syscalls.pivot_root(new, new + "/oldroot")
    os.chdir("/")
    syscalls.umount_detached("/oldroot")
    os.rmdir("/oldroot")
    if sandbox.readonly_root:
        syscalls.mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _loopback_up()


def _bind(source: str, target: str, readonly: bool, devices: bool = False) -> None:
    """bubblewrap's bind: recursive, then the target and each submount remounted with the flags they had, plus
    nosuid, nodev (not for a device) and read-only when asked (a recursive bind keeps the submounts' own)."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    syscalls.mount(source, target, None, MS_BIND | MS_REC)
    added = MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if readonly else 0)
    for point in [target, *_submounts(target)]:
        kept = os.statvfs(point).f_flag & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)   # ST_* == MS_* bits
        syscalls.mount(None, point, None, MS_REMOUNT | MS_BIND | kept | added)


def _submounts(target: str) -> list[str]:
    """The mount points below ``target`` (mountinfo writes a space, a tab, a newline and a backslash in octal)."""
    with open("/proc/self/mountinfo") as info:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in info]
    return [p for p in points if p.startswith(target.rstrip("/") + "/")]


def _tmpfs(target: str, size: int, mode: str = "1777") -> None:
    """bubblewrap's ``--tmpfs``: nosuid, nodev (executable, as bubblewrap has no option for noexec)."""
    os.makedirs(target, exist_ok=True)
    syscalls.mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")


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
    syscalls.mount("devpts", f"{target}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")


def _proc(target: str) -> None:
    """bubblewrap's ``--proc``: this namespace's processes only, and the parts of it that write to the host's
    kernel (where still writable) covered read-only."""
    os.makedirs(target, exist_ok=True)
    syscalls.mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_COVERED:
        if os.access(f"{target}/{name}", os.W_OK):
            syscalls.mount(f"{target}/{name}", f"{target}/{name}", None, MS_BIND)
            syscalls.mount(None, f"{target}/{name}", None,
                           MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
