"""What each sandbox mechanism does, in one vocabulary of effects, observed rather than rebuilt.

- :func:`warm_effects` runs the warm child's real steps (``autograder.warm.isolate``: the relay's, PID 1's and the
  kernel's, the font cache copy and the kernel's environment; ``autograder.warm.rootfs``: PID 1's new root) against
  :class:`Recorder`, a recording fake of the system calls they make (mount, unshare, prctl, pivot_root, umount2,
  capset, setrlimit, setgroups, setresgid, setresuid, sched_setaffinity, setsid, chdir, symlink, the files they
  open), and reads the effects off the record;
- :func:`cold_effects` reads the real cold command line (``policy.cold_command``) with a model of what each option
  does: bubblewrap 0.8's own (``BWRAP_*`` below, from its source, ``bind_mount`` and ``setup_newroot``, and checked
  against a real bubblewrap's ``/proc/self/mountinfo`` by ``tests/unit/test_policy.py`` where one runs), setpriv's,
  prlimit's, taskset's and the shell line's.

Neither reads the policy's own translation tables: the constants below are Linux's, written here again.
"""
from __future__ import annotations

import ctypes
import os
import resource
import shlex
import types
from unittest import mock

# Linux's constants (<sys/mount.h>, <linux/sched.h>, <linux/prctl.h>), independent of autograder's copies
MS = {"ro": 1, "nosuid": 2, "nodev": 4, "noexec": 8}
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
CLONE = {"mount": 0x00020000, "cgroup": 0x02000000, "uts": 0x04000000, "ipc": 0x08000000, "user": 0x10000000,
         "pid": 0x20000000, "net": 0x40000000}
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
LAST_CAP = 40
SUB = ".pte-submount"   # every bind source seems to have one submount here: a recursive bind must cover it
RLIMIT_NAMES = {getattr(resource, name): name for name in sorted(dir(resource), reverse=True)
                if name.startswith("RLIMIT_") and name != "RLIMIT_OFILE"}

# bubblewrap 0.8: --dev's devices (bound with nosuid only), links, its devpts; --proc's covered folders
BWRAP_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
BWRAP_DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                   "stderr": "/proc/self/fd/2", "core": "/proc/kcore", "ptmx": "pts/ptmx"}
BWRAP_DEVPTS = "newinstance,ptmxmode=0666,mode=620"
BWRAP_PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")
BWRAP_NAMESPACES = {"--unshare-pid": "pid", "--unshare-net": "net", "--unshare-ipc": "ipc",
                    "--unshare-uts": "uts", "--unshare-cgroup-try": "cgroup", "--unshare-cgroup": "cgroup",
                    "--unshare-user": "user"}
PRLIMIT = {"--data": "RLIMIT_DATA", "--fsize": "RLIMIT_FSIZE", "--core": "RLIMIT_CORE", "--nofile": "RLIMIT_NOFILE",
           "--nproc": "RLIMIT_NPROC", "--as": "RLIMIT_AS", "--stack": "RLIMIT_STACK"}


def flag_names(flags: int) -> frozenset[str]:
    return frozenset(name for name, bit in MS.items() if flags & bit)


def empty_effects() -> dict:
    return {"mounts": {}, "links": {}, "dirs": set(), "namespaces": set(), "rlimits": {}, "cpus": None,
            "uid": None, "gid": None, "groups": None, "caps_emptied": set(), "no_new_privs": False,
            "session": False, "dies_with_parent": False, "cwd": None, "env_set": {}, "env_unset": set(),
            "font_cache": None, "root": None, "old_root_detached": False, "loopback_up": False, "cgroups": set()}


def _cpu_set(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


# --- the cold side: the command line, read with a model of each option ----------------------------------------
def _bwrap_bind(effects: dict, source: str, target: str, readonly: bool, devices: bool = False) -> None:
    """bubblewrap's bind_mount: recursive; the mount and every submount get nosuid, nodev unless a device, ro."""
    flags = {"nosuid"} | (set() if devices else {"nodev"}) | ({"ro"} if readonly else set())
    effects["mounts"][target] = ("bind", source, frozenset(flags), frozenset(flags))


def cold_effects(argv: list[str]) -> dict:  # noqa: C901  (one branch per option)
    """The effects of a cold kernel's command line (as root: setpriv drops the user)."""
    effects = empty_effects()
    effects["root"] = ("tmpfs", frozenset({"nosuid", "nodev"}))
    effects["old_root_detached"] = True   # bubblewrap pivots into its new root and detaches the old one
    i, perms, size = 0, None, None
    while i < len(argv):
        arg, nxt = argv[i], (argv[i + 1] if i + 1 < len(argv) else None)
        option, _, value = arg.partition("=")
        if arg == "sh" and nxt == "-c" and "echo $$" in argv[i + 2]:   # the cgroups joined, one write each
            count = argv[i + 2].count("echo $$")
            effects["cgroups"] = set(argv[i + 4:i + 4 + count])
            i += 3 + count
        elif arg == "taskset" and nxt == "-c":
            effects["cpus"], i = _cpu_set(argv[i + 2]), i + 2
        elif option in PRLIMIT and value:
            effects["rlimits"][PRLIMIT[option]] = int(value)
        elif arg == "bwrap":
            effects["namespaces"].add("mount")
        elif arg in BWRAP_NAMESPACES:
            effects["namespaces"].add(BWRAP_NAMESPACES[arg])
        elif arg == "--die-with-parent":
            effects["dies_with_parent"] = True
        elif arg == "--new-session":
            effects["session"] = True
        elif arg == "--perms":
            perms, i = int(nxt, 8), i + 1
        elif arg == "--size":
            size, i = int(nxt), i + 1
        elif arg == "--tmpfs":
            effects["mounts"][nxt] = ("tmpfs", (size, perms if perms is not None else 0o755),
                                      frozenset({"nosuid", "nodev"}), None)
            perms, size, i = None, None, i + 1
        elif arg == "--dir":   # the folders on the way to a mount point: the warm side's makedirs (under /dev: --dev's)
            effects["dirs"] |= {nxt} if nxt.startswith("/dev/") else set()
            perms, i = None, i + 1
        elif arg in ("--ro-bind", "--bind"):
            _bwrap_bind(effects, nxt, argv[i + 2], readonly=arg == "--ro-bind")
            i += 2
        elif arg == "--dev":
            effects["mounts"][nxt] = ("tmpfs", (None, 0o755), frozenset({"nosuid", "nodev"}), None)
            for device in BWRAP_DEVICES:
                _bwrap_bind(effects, f"/dev/{device}", f"{nxt}/{device}", readonly=False, devices=True)
            effects["links"].update({f"{nxt}/{name}": link for name, link in BWRAP_DEV_LINKS.items()})
            effects["dirs"] |= {f"{nxt}/shm", f"{nxt}/pts"}
            effects["mounts"][f"{nxt}/pts"] = ("devpts", BWRAP_DEVPTS, frozenset({"nosuid", "noexec"}), None)
            i += 1
        elif arg == "--proc":
            effects["mounts"][nxt] = ("proc", None, frozenset({"nosuid", "nodev", "noexec"}), None)
            for name in BWRAP_PROC_COVERED:   # where writable: always so under the fake
                covered = frozenset({"ro", "nosuid", "nodev", "noexec"})   # not recursive: no submount covered
                effects["mounts"][f"{nxt}/{name}"] = ("bind", f"{nxt}/{name}", covered, frozenset())
            i += 1
        elif arg == "--remount-ro" and nxt == "/":
            effects["root"] = ("tmpfs", effects["root"][1] | {"ro"})
            i += 1
        elif arg == "--chdir":
            effects["cwd"], i = nxt, i + 1
        elif arg == "--setenv":
            effects["env_set"][nxt], i = argv[i + 2], i + 2
        elif arg == "--unsetenv":
            effects["env_unset"].add(nxt)
            i += 1
        elif option == "--reuid":
            effects["uid"] = int(value)
        elif option == "--regid":
            effects["gid"] = int(value)
        elif arg == "--clear-groups":
            effects["groups"] = []
        elif arg == "--no-new-privs":
            effects["no_new_privs"] = True
        elif arg == "--bounding-set=-all":
            effects["caps_emptied"].add("bounding")
        elif arg == "--inh-caps=-all":   # the ambient set is a subset of the inheritable one: emptied with it
            effects["caps_emptied"] |= {"inheritable", "ambient"}
        elif arg == "-c" and argv[i - 1] == "sh":
            _shell_line(effects, nxt)
            i += 1
        i += 1
    if effects["uid"]:   # setpriv changes the real, effective and saved uid from 0: the kernel clears these two
        effects["caps_emptied"] |= {"effective", "permitted"}
    if "net" in effects["namespaces"]:   # bubblewrap brings loopback up in the network namespace it makes
        effects["loopback_up"] = True
    return effects


def _shell_line(effects: dict, line: str) -> None:
    for part in line.split(";"):
        words = shlex.split(part)
        if words[:1] == ["unset"]:
            effects["env_unset"] |= set(words[1:])
        elif words[:2] == ["cp", "-r"]:
            effects["font_cache"] = (words[2], words[3].replace("$HOME/", "~/"))


# --- the warm side: the real steps against a recording fake -----------------------------------------------------
# what the recording fake replaces in each module of the warm steps (a name gone from its module fails the patch:
# no step ever makes a real call under the fake)
FAKED = {"autograder.warm.isolate": ("os", "resource", "shutil", "open"),
         "autograder.warm.rootfs": ("os", "open", "_loopback_up"),
         "autograder.warm.syscalls": ("_libc",)}


class Recorder:
    """Stands in for libc (in ``autograder.warm.syscalls``), and for os, resource, open, shutil and the loopback
    ioctl in the modules that make the warm steps (``FAKED``); records each call."""

    def __init__(self, mpl_target: str = ""):
        self.calls: list[tuple] = []
        self.uid = 0
        self.mpl_target = mpl_target
        recorder = self

        class FakeOs(types.ModuleType):
            def __getattr__(self, name):
                return getattr(os, name)

        fake_os = FakeOs("os")
        for name in ("makedirs", "symlink", "chdir", "rmdir", "setgroups", "setresgid", "sched_setaffinity",
                     "setsid"):
            setattr(fake_os, name, self._recording(name))
        fake_os.setresuid = self._setresuid
        fake_os.getuid = lambda: self.uid
        fake_os.getpid = lambda: 4242
        fake_os.statvfs = lambda path: types.SimpleNamespace(f_flag=0)
        fake_os.access = lambda path, mode: True
        fake_os.path = types.SimpleNamespace(
            isdir=lambda p: p == recorder.mpl_target or os.path.isdir(p), exists=os.path.exists,
            join=os.path.join, dirname=os.path.dirname)
        self.os = fake_os
        self.resource = types.SimpleNamespace(setrlimit=self._recording("setrlimit"),
                                              **{n: getattr(resource, n) for n in dir(resource)
                                                 if n.startswith("RLIMIT_")})
        self.shutil = types.SimpleNamespace(copytree=self._recording("copytree"))
        self.libc = types.SimpleNamespace(mount=self._mount, unshare=self._libc_call("unshare"),
                                          prctl=self._prctl, syscall=self._libc_call("pivot_root"),
                                          umount2=self._libc_call("umount2"), capset=self._capset)

    def _recording(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, *args))
        return record

    def _libc_call(self, name):
        def call(*args):
            self.calls.append((name, *(a.decode() if isinstance(a, bytes) else getattr(a, "value", a)
                                       for a in args)))
            return 0
        return call

    def _mount(self, source, target, fstype, flags, data):
        text = [a.decode() if isinstance(a, bytes) else a for a in (source, target, fstype, data)]
        self.calls.append(("mount", text[0], text[1], text[2], flags.value, text[3]))
        return 0

    def _prctl(self, option, arg, arg3, *rest):
        self.calls.append(("prctl", option, arg.value, arg3.value))
        return 0

    def _capset(self, header, data):
        self.calls.append(("capset", tuple((d.effective, d.permitted, d.inheritable) for d in data)))
        return 0

    def _setresuid(self, *ids):
        self.calls.append(("setresuid", *ids))
        self.uid = ids[0]

    def open(self, path, mode="r", *args, **kwargs):
        import io

        if "w" in mode or "a" in mode:
            self.calls.append(("open-write", str(path)))
            return io.StringIO()
        if path == "/proc/sys/kernel/cap_last_cap":
            return io.StringIO(f"{LAST_CAP}\n")
        if path == "/proc/self/status":
            left = 0 if self.uid else 0x1ffffffffff
            return io.StringIO("".join(f"{name}:\t{left:016x}\n" for name in ("CapInh", "CapPrm", "CapEff",
                                                                                "CapBnd", "CapAmb")))
        if path == "/proc/self/mountinfo":   # each bind target seems to hold one submount
            binds = [c[2] for c in self.calls if c[0] == "mount" and c[4] == MS_BIND | MS_REC]
            escaped = [f"{t}/{SUB}".replace("\\", "\\134").replace(" ", "\\040") for t in binds]   # as Linux writes it
            return io.StringIO("".join(f"1 1 0:1 / {point} rw - x x rw\n" for point in escaped))
        raise AssertionError(f"the warm steps opened {path!r}, which the recording fake does not know")

    def patches(self, kind: str, module) -> list:
        """The fakes for ``module``, which holds the steps of ``kind`` (a key of FAKED; ``module`` may be a
        scratch copy of it)."""
        fakes = {"os": self.os, "resource": self.resource, "shutil": self.shutil, "open": self.open,
                 "_libc": self.libc, "_loopback_up": self._recording("loopback_up")}
        return [mock.patch.object(module, name, fakes[name], create=name == "open") for name in FAKED[kind]]


def run_warm_steps(policy, host_env: dict[str, str], isolate=None, rootfs=None) -> tuple[Recorder, dict[str, str]]:
    """The warm child's steps for ``policy`` (relay, PID 1, kernel, font cache), recorded; and the kernel's env.
    ``isolate``, ``rootfs``: the modules whose steps run (``autograder.warm.isolate`` and ``autograder.warm.rootfs``,
    or a scratch copy of either); the steps of ``isolate`` call those of ``rootfs``."""
    import contextlib

    from autograder.warm import isolate as real_isolate
    from autograder.warm import rootfs as real_rootfs
    from autograder.warm import syscalls

    isolate, rootfs = isolate or real_isolate, rootfs or real_rootfs
    recorder = Recorder(policy.mpl_target if policy.mpl_cache else "")
    with contextlib.ExitStack() as stack:
        for kind, module in (("autograder.warm.isolate", isolate), ("autograder.warm.rootfs", rootfs),
                             ("autograder.warm.syscalls", syscalls)):
            for patch in recorder.patches(kind, module):
                stack.enter_context(patch)
        stack.enter_context(mock.patch.object(isolate, "rootfs", rootfs))
        isolate.enter_relay(policy)
        isolate.enter_init(policy)
        isolate.enter_kernel(policy)
        isolate.copy_font_cache(policy.to_message(), "/home-of-the-kernel")
    return recorder, isolate.kernel_env(policy, host_env)


def warm_effects(policy, host_env: dict[str, str] | None = None, module=None, rootfs=None) -> dict:  # noqa: C901
    """The effects of the warm child's steps for ``policy``, read off what they did (one branch per call).
    ``module``, ``rootfs``: scratch copies to run instead of ``autograder.warm.isolate`` and ``.rootfs``."""
    from autograder.warm.rootfs import ROOT_DIR

    host_env = host_env or {"PWD": "/somewhere", "HOME": "/h", "PATH": "/usr/bin"}
    recorder, env = run_warm_steps(policy, host_env, module, rootfs)
    effects = empty_effects()
    pivoted, dropped, before_drop = False, set(), True

    def inside(path: str) -> str:
        if pivoted or path is None:
            return path
        return "/" if path == ROOT_DIR else (path[len(ROOT_DIR):] if path.startswith(ROOT_DIR + "/") else path)

    for call in recorder.calls:
        name, args = call[0], call[1:]
        if name == "mount":
            source, target, fstype, flags, data = args
            target = inside(target)
            if flags & MS_PRIVATE:
                continue
            if fstype == "tmpfs":
                options = dict(part.split("=") for part in data.split(","))
                if target == "/":   # the new root's own size is no policy's
                    effects["root"] = ("tmpfs", flag_names(flags))
                else:   # /dev's size neither: bubblewrap gives it none
                    detail = (int(options["size"]) if target != "/dev" else None, int(options["mode"], 8))
                    effects["mounts"][target] = ("tmpfs", detail, flag_names(flags), None)
            elif fstype in ("proc", "devpts"):
                effects["mounts"][target] = (fstype, data, flag_names(flags), None)
            elif flags & MS_REMOUNT and target == "/" and pivoted:
                effects["root"] = (effects["root"][0], flag_names(flags))
            elif flags & MS_REMOUNT and target.endswith("/" + SUB):
                parent = target[: -len(SUB) - 1]
                kind, src, own, _ = effects["mounts"][parent]
                effects["mounts"][parent] = (kind, src, own, flag_names(flags))
            elif flags & MS_REMOUNT:
                kind, src, _, sub = effects["mounts"][target]
                effects["mounts"][target] = (kind, src, flag_names(flags), sub)
            elif flags & MS_BIND:
                effects["mounts"][target] = ("bind", inside(source), frozenset(), frozenset())
        elif name == "symlink":
            effects["links"][inside(args[1])] = args[0]
        elif name == "makedirs" and inside(args[0]).startswith("/dev/"):
            effects["dirs"].add(inside(args[0]))
        elif name == "pivot_root":
            pivoted = True
        elif name == "umount2" and args[0] == "/oldroot":
            effects["old_root_detached"] = True
        elif name == "unshare":
            effects["namespaces"] |= {ns for ns, bit in CLONE.items() if args[0] & bit}
        elif name == "prctl":
            option, value = args[0], args[1]
            if option == PR_SET_PDEATHSIG and value and not before_drop:
                effects["dies_with_parent"] = True
            elif option == PR_CAPBSET_DROP:
                dropped.add(value)
            elif option == PR_CAP_AMBIENT and value == 4:
                effects["caps_emptied"].add("ambient")
            elif option == PR_SET_NO_NEW_PRIVS and value == 1:
                effects["no_new_privs"] = True
        elif name == "setrlimit":
            soft, hard = args[1]
            effects["rlimits"][RLIMIT_NAMES[args[0]]] = soft if soft == hard else (soft, hard)
        elif name == "sched_setaffinity":
            effects["cpus"] = set(args[1])
        elif name == "setgroups":
            effects["groups"] = list(args[0])
        elif name == "setresgid" and len(set(args)) == 1:
            effects["gid"] = args[0]
        elif name == "setresuid" and len(set(args)) == 1:
            effects["uid"], before_drop = args[0], False
            if args[0]:
                effects["caps_emptied"] |= {"effective", "permitted"}
        elif name == "capset" and not any(any(d) for d in args[0]):
            effects["caps_emptied"] |= {"effective", "permitted", "inheritable"}
        elif name == "setsid":
            effects["session"] = True
        elif name == "chdir":
            effects["cwd"] = args[0]
        elif name == "copytree":
            effects["font_cache"] = (args[0], "~/" + os.path.relpath(args[1], "/home-of-the-kernel"))
        elif name == "loopback_up":
            effects["loopback_up"] = True
        elif name == "open-write" and args[0].endswith("cgroup.procs"):
            effects["cgroups"].add(args[0])
    if dropped == set(range(LAST_CAP + 1)):
        effects["caps_emptied"].add("bounding")
    effects["env_set"] = {k: v for k, v in env.items() if host_env.get(k) != v}
    effects["env_unset"] = {k for k in host_env if k not in env}
    return effects


def differences(cold: dict, warm: dict) -> list[str]:
    """Each effect that differs, said once (mounts one by one)."""
    found = []
    for key in cold:
        if key == "mounts":
            for target in sorted(set(cold["mounts"]) | set(warm["mounts"])):
                if cold["mounts"].get(target) != warm["mounts"].get(target):
                    found.append(f"mount {target}: cold {cold['mounts'].get(target)} warm {warm['mounts'].get(target)}")
            if [t for t in cold["mounts"] if t in warm["mounts"]] != [t for t in warm["mounts"] if t in cold["mounts"]]:
                found.append(f"mount order: cold {list(cold['mounts'])} warm {list(warm['mounts'])}")
        elif cold[key] != warm[key]:
            found.append(f"{key}: cold {cold[key]!r} warm {warm[key]!r}")
    return found


__all__ = ["cold_effects", "warm_effects", "differences", "Recorder", "run_warm_steps", "ctypes"]
