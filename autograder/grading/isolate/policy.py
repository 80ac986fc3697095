"""One description of a grading kernel's sandbox, and the two mechanisms' steps derived from it.

:class:`Policy` says what a kernel gets: the file system it sees (:meth:`Policy.mounts`, in order), the
namespaces it lives in, the user it runs as, the limits it runs under, the CPUs it may use, the cgroups it joins
and the environment it starts with. It is built once per kernel (``sandbox.policy``) and never spelled again:

- a **cold** kernel's command line (its cgroups, taskset, prlimit, bubblewrap, setpriv) is :func:`cold_command`,
  and without a sandbox (``--sandbox none``) :func:`unsandboxed_command` (cgroups, taskset, prlimit);
- a **warm** kernel's child (``autograder.warm.isolate``) receives :meth:`Policy.to_message` as the ``pte_sandbox``
  argument of ``start_kernel``, reads it back with :meth:`Policy.from_message` (a message of another
  :data:`VERSION` is refused, so the kernel starts nowhere), and runs :func:`warm_mount_steps` and
  :meth:`Policy.rlimits`.

Both translations are tables keyed by the policy's own vocabulary (``MOUNT_KINDS``, ``NAMESPACES``,
``RLIMITS``): a kind either side cannot translate raises. ``tests/unit/test_policy.py`` observes both: the warm
child's real steps run against a recording fake of the system calls, the cold command line read with a model of
bubblewrap, setpriv, prlimit and taskset (checked against a real bubblewrap), and compares what they do, mount
flags included; one-line drifts planted on either side each fail it.

This module imports only the standard library: the warm template imports it before any kernel exists.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

VERSION = 1
NOBODY = 65534
MPL_CACHE_IN_SANDBOX = "/opt/pte-mplcache"

# a kernel's namespaces; "mount" is bubblewrap's own (it always makes one), "user" is added where the grader is
# not root (bubblewrap then maps uid 65534 inside a user namespace of its own)
NAMESPACES = ("pid", "net", "ipc", "uts", "cgroup", "mount")
# what a mount step may be: a tmpfs of a size and mode, a bind read-only or writable, a minimal /dev, a new /proc
MOUNT_KINDS = ("tmpfs", "ro-bind", "bind", "dev", "proc")
# the rlimits a kernel runs under, by resource.RLIMIT_* name
RLIMITS = ("RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_NPROC")


class PolicyError(ValueError):
    """A policy message that is not one this code reads (another version, a missing or wrong field)."""


@dataclass(frozen=True)
class Mount:
    """One step of the kernel's file system, applied in order."""

    kind: str
    target: str
    source: str = ""
    size: int = 0
    mode: str = ""


@dataclass(frozen=True)
class Policy:
    """What one grading kernel's sandbox is. Sizes in bytes; ``nproc`` None where a pids cgroup counts."""

    work: str
    runtime: str
    roots: tuple[str, ...]
    disk_bytes: int
    data_bytes: int
    fsize_bytes: int
    nofile: int
    nproc: int | None
    cpus: str = ""
    mpl_cache: str = ""
    cgroup_procs: tuple[str, ...] = ()
    uid: int = NOBODY
    gid: int = NOBODY
    namespaces: tuple[str, ...] = NAMESPACES
    env: tuple[tuple[str, str], ...] = (("JPY_PARENT_PID", "1"),)   # its parent is PID 1 of its namespace
    unset_env: tuple[str, ...] = ("PWD",)
    no_new_privs: bool = True
    drop_capabilities: bool = True   # every set: effective, permitted, inheritable, bounding, ambient
    readonly_root: bool = True
    mpl_target: str = MPL_CACHE_IN_SANDBOX
    version: int = VERSION

    def mounts(self) -> list[Mount]:
        """The kernel's file system, in the order both mechanisms make it: ``/dev`` and ``/proc``, then
        ``/tmp`` before the read-only roots (a root under ``/tmp`` stays visible), the work folder, the runtime
        folder it shares with the grader, and the font cache."""
        steps = [Mount("dev", "/dev"), Mount("proc", "/proc"),
                 Mount("tmpfs", "/tmp", size=self.disk_bytes, mode="1777"),
                 Mount("tmpfs", "/dev/shm", size=self.disk_bytes, mode="1777")]
        steps += [Mount("ro-bind", root, source=root) for root in self.roots]
        if self.mpl_cache:
            steps.append(Mount("ro-bind", self.mpl_target, source=self.mpl_cache))
        steps += [Mount("tmpfs", self.work, size=self.disk_bytes, mode="1777"),
                  Mount("bind", self.runtime, source=self.runtime)]
        return steps

    def rlimits(self) -> dict[str, int]:
        """The kernel's rlimits (soft = hard), by ``resource`` name."""
        limits = {"RLIMIT_DATA": self.data_bytes, "RLIMIT_FSIZE": self.fsize_bytes, "RLIMIT_CORE": 0,
                  "RLIMIT_NOFILE": self.nofile}
        if self.nproc:
            limits["RLIMIT_NPROC"] = self.nproc
        return limits

    def to_message(self) -> dict:
        """The policy as the JSON-able dict that travels to a warm template."""
        return dataclasses.asdict(self)

    @classmethod
    def from_message(cls, message) -> Policy:
        """Read a policy message back; :class:`PolicyError` for anything else than this version's."""
        if not isinstance(message, dict):
            raise PolicyError(f"a sandbox policy must be a dict, not {type(message).__name__}")
        if message.get("version") != VERSION:
            raise PolicyError(f"sandbox policy version {message.get('version')!r}, this code reads {VERSION}")
        names = {field.name for field in dataclasses.fields(cls)}
        if set(message) != names:
            raise PolicyError(f"sandbox policy fields differ: missing {sorted(names - set(message))}, "
                              f"unknown {sorted(set(message) - names)}")
        tuples = {"roots", "cgroup_procs", "namespaces", "unset_env"}
        values = {name: tuple(value) if name in tuples else value for name, value in message.items()}
        values["env"] = tuple((str(k), str(v)) for k, v in message["env"])
        policy = cls(**values)
        for mount in policy.mounts():
            if mount.kind not in MOUNT_KINDS:
                raise PolicyError(f"unknown mount kind {mount.kind!r}")
        unknown = set(policy.namespaces) - set(NAMESPACES)
        if unknown:
            raise PolicyError(f"unknown namespaces {sorted(unknown)}")
        return policy


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


# --- the cold mechanism: bubblewrap's options for each step of the policy -------------------------------------
BWRAP_NAMESPACES = {"pid": "--unshare-pid", "net": "--unshare-net", "ipc": "--unshare-ipc",
                    "uts": "--unshare-uts", "cgroup": "--unshare-cgroup-try", "mount": None}   # always its own
PRLIMIT_OPTIONS = {"RLIMIT_DATA": "--data", "RLIMIT_FSIZE": "--fsize", "RLIMIT_CORE": "--core",
                   "RLIMIT_NOFILE": "--nofile", "RLIMIT_NPROC": "--nproc"}


def _bwrap_mount(mount: Mount) -> list[str]:
    if mount.kind == "dev":
        return ["--dev", mount.target]
    if mount.kind == "proc":
        return ["--proc", mount.target]
    if mount.kind == "tmpfs":
        return ["--perms", mount.mode, "--size", str(mount.size), "--tmpfs", mount.target]
    if mount.kind == "ro-bind":
        return ["--ro-bind", mount.source, mount.target]
    if mount.kind == "bind":
        return ["--bind", mount.source, mount.target]
    raise PolicyError(f"bubblewrap has no translation for mount kind {mount.kind!r}")


def bwrap_args(policy: Policy, as_root: bool) -> list[str]:
    """bubblewrap's options for ``policy`` (up to and including ``--``). ``as_root``: the grader is root, so
    the drop to 65534 is setpriv's (:func:`cold_command`), not a user namespace's."""
    args = ["bwrap", "--die-with-parent", "--new-session"]
    for name in policy.namespaces:
        if name not in BWRAP_NAMESPACES:
            raise PolicyError(f"bubblewrap has no translation for namespace {name!r}")
        if BWRAP_NAMESPACES[name]:
            args.append(BWRAP_NAMESPACES[name])
    if not as_root:
        args.append("--unshare-user")
    mounts = policy.mounts()
    # folders on the way to a mount point that no read-only root provides
    roots = [m.target for m in mounts if m.kind == "ro-bind"]
    made = {m.target for m in mounts if m.kind in ("dev", "proc", "tmpfs") and m.target in ("/dev", "/proc", "/tmp",
                                                                                           "/dev/shm")}
    dirs: list[str] = []
    for mount in mounts:
        for parent in _ancestors(mount.target):
            if parent not in made and not any(parent == r or parent.startswith(r + "/") for r in roots):
                dirs += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        made.add(mount.target)
    early = [m for m in mounts if m.target in ("/dev", "/proc", "/tmp", "/dev/shm")]
    for mount in early:
        args += _bwrap_mount(mount)
    args += dirs
    for mount in mounts:
        if mount not in early:
            args += _bwrap_mount(mount)
    if not as_root:
        args += ["--uid", str(policy.uid), "--gid", str(policy.gid)]
    args += ["--chdir", policy.work]
    for name, value in policy.env:
        args += ["--setenv", name, value]
    if policy.readonly_root:
        args += ["--remount-ro", "/"]
    return args + ["--"]


def _limits_prefix(policy: Policy, have_taskset: bool, rlimits: dict[str, int]) -> list[str]:
    """The policy's cgroups joined (a shell that writes its pid into each ``cgroup.procs`` and stops at the first
    write that fails), its CPU set (taskset) and ``rlimits`` (prlimit). A CPU set that cannot be applied is a
    PolicyError: the kernel does not start."""
    if policy.cpus and not have_taskset:
        raise PolicyError(f"the kernel is to run on CPUs {policy.cpus}, and taskset is missing on this host")
    prefix: list[str] = []
    if policy.cgroup_procs:
        script = "".join(f'echo $$ > "${index + 1}" && ' for index in range(len(policy.cgroup_procs)))
        prefix = ["sh", "-c", script + f'shift {len(policy.cgroup_procs)} && exec "$@"', "sh", *policy.cgroup_procs]
    if policy.cpus:
        prefix += ["taskset", "-c", policy.cpus]
    return prefix + ["prlimit", *(f"{PRLIMIT_OPTIONS[name]}={value}" for name, value in rlimits.items()), "--"]


def unsandboxed_command(policy: Policy, have_taskset: bool = True) -> list[str]:
    """``--sandbox none``: what is left of the policy without a sandbox, its cgroups, CPU set and rlimits, less
    RLIMIT_NPROC (the kernel runs as the grader's own user, whose every process it would count)."""
    return _limits_prefix(policy, have_taskset, {k: v for k, v in policy.rlimits().items() if k != "RLIMIT_NPROC"})


def cold_command(policy: Policy, as_root: bool, have_taskset: bool = True) -> list[str]:
    """The whole command line that wraps a cold kernel's own: its cgroups, taskset, prlimit, bubblewrap, the drop
    of the user and every capability (setpriv as root; bubblewrap's user namespace otherwise), the font cache
    copied into the empty work folder, the environment's leftovers unset."""
    outer = policy.rlimits()
    inner: dict[str, int] = {}
    if not as_root and "RLIMIT_NPROC" in outer:
        # not root: RLIMIT_NPROC set inside bubblewrap's user namespace counts that namespace's processes only
        inner["RLIMIT_NPROC"] = outer.pop("RLIMIT_NPROC")
    prefix = _limits_prefix(policy, have_taskset, outer)
    args = bwrap_args(policy, as_root)
    if as_root:
        drop = ["setpriv", f"--reuid={policy.uid}", f"--regid={policy.gid}", "--clear-groups"]
        if policy.no_new_privs:
            drop.append("--no-new-privs")
        if policy.drop_capabilities:
            drop += ["--bounding-set=-all", "--inh-caps=-all"]
        args += drop
    elif inner:
        args += ["prlimit", *(f"{PRLIMIT_OPTIONS[name]}={value}" for name, value in inner.items()), "--"]
    unset = "".join(f"unset {name}; " for name in policy.unset_env)
    copy = (f'cp -r {policy.mpl_target} "$HOME/.matplotlib" 2>/dev/null; ' if policy.mpl_cache else "")
    return prefix + args + ["sh", "-c", f'{copy}{unset}exec "$@"', "sh"]


# --- the warm mechanism: the per-child steps (autograder.warm.isolate runs them) -------------------------------
CLONE_FLAGS = {"mount": 0x00020000, "cgroup": 0x02000000, "uts": 0x04000000, "ipc": 0x08000000,
               "pid": 0x20000000, "net": 0x40000000}


def warm_namespace_flags(policy: Policy) -> tuple[int, int]:
    """``unshare`` flags for the relay (the PID namespace, whose next child is PID 1) and for PID 1 (the rest)."""
    for name in policy.namespaces:
        if name not in CLONE_FLAGS:
            raise PolicyError(f"the warm child has no translation for namespace {name!r}")
    relay = CLONE_FLAGS["pid"] if "pid" in policy.namespaces else 0
    rest = 0
    for name in policy.namespaces:
        if name != "pid":
            rest |= CLONE_FLAGS[name]
    return relay, rest


def warm_mount_steps(policy: Policy) -> list[tuple]:
    """The warm child's mount steps under its new root, as data: ``("tmpfs", target, size, mode)``,
    ``("bind", source, target, readonly)``, ``("dev", target)``, ``("proc", target)``."""
    steps: list[tuple] = []
    for mount in policy.mounts():
        if mount.kind == "tmpfs":
            steps.append(("tmpfs", mount.target, mount.size, mount.mode))
        elif mount.kind in ("ro-bind", "bind"):
            steps.append(("bind", mount.source, mount.target, mount.kind == "ro-bind"))
        elif mount.kind in ("dev", "proc"):
            steps.append((mount.kind, mount.target))
        else:
            raise PolicyError(f"the warm child has no translation for mount kind {mount.kind!r}")
    return steps
