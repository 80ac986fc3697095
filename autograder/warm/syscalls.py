"""The Linux calls of the per-child step that Python's ``os`` lacks, made through libc: ``mount``, ``unshare``,
``prctl``, ``pivot_root``, ``umount2`` and ``capset``, with the constants they take. Each raises
:class:`IsolationError` when the call fails, so a step that fails never lets the child go on to the kernel.

``autograder.warm.rootfs`` (the new root) and ``autograder.warm.isolate`` (the processes and the drop) make
every system call of theirs through this module (tests/support/sandbox_views.py records them by replacing
``_libc`` here)."""
from __future__ import annotations

import ctypes
import os
import platform

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAPABILITY_VERSION_3 = 0x20080522
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    """A step of the per-child sandbox failed: the child must not run the kernel."""


def check(result: int, what: str) -> None:
    """Raise :class:`IsolationError` with libc's ``errno`` unless ``result`` is 0."""
    if result != 0:
        errno = ctypes.get_errno()
        raise IsolationError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
          f"mount {source} on {target}")


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    check(_libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(arg3), 0, 0), f"prctl {option}")


def unshare(flags: int, what: str = "unshare") -> None:
    check(_libc.unshare(flags), what)


def pivot_root(new: str, old: str) -> None:
    check(_libc.syscall(SYS_PIVOT_ROOT[platform.machine()], new.encode(), old.encode()), "pivot_root")


def umount_detached(target: str) -> None:
    check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def clear_capabilities() -> None:
    """capset(2): effective, permitted and inheritable all empty (setpriv's ``--inh-caps=-all`` for the last)."""
    data = (_CapData * 2)()
    check(_libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), data), "capset")
