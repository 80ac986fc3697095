"""One sandbox policy, two mechanisms: bubblewrap's command line and the warm child's steps, derived from the same
:class:`Policy`, compared step by step (tests/e2e/test_sandbox_parity.py compares what a kernel then sees)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from unittest import mock

import pytest

from autograder.grading.isolate import policy as pol
from autograder.grading.isolate import sandbox
from autograder.grading.isolate.policy import Policy, PolicyError
from autograder.grading.messages import SandboxFailed, decode_one_of
from autograder.grading.plan.settings import Limits


def example(**changes) -> Policy:
    base = Policy(work="/g/run 1/work", runtime="/g/run 1/run", roots=("/usr", "/opt/venv", "/tmp/course/data"),
                  disk_bytes=64 << 20, data_bytes=1 << 30, fsize_bytes=8 << 20, nofile=256, nproc=80, cpus="1",
                  mpl_cache="/var/cache/mpl", cgroup_procs=("/sys/fs/cgroup/pids/pte/k1/cgroup.procs",))
    return dataclasses.replace(base, **changes)


def cold_view(args: list[str], as_root: bool) -> dict:
    """What a cold command line does, read back from its options into the policy's own vocabulary."""
    view = {"mounts": [], "namespaces": set(), "rlimits": {}, "env": {}, "identity": set(), "unset": set()}
    option_rlimit = {flag: name for name, flag in pol.PRLIMIT_OPTIONS.items()}
    option_ns = {flag: name for name, flag in pol.BWRAP_NAMESPACES.items() if flag}
    i, size, mode = 0, 0, ""
    while i < len(args):
        arg = args[i]
        if arg.split("=")[0] in option_rlimit:
            view["rlimits"][option_rlimit[arg.split("=")[0]]] = int(arg.split("=")[1])
        elif arg in option_ns:
            view["namespaces"].add(option_ns[arg])
        elif arg == "bwrap":
            view["namespaces"].add("mount")
        elif arg == "--perms":
            mode, i = args[i + 1], i + 1
        elif arg == "--size":
            size, i = int(args[i + 1]), i + 1
        elif arg == "--tmpfs":
            view["mounts"].append(("tmpfs", args[i + 1], size, mode, args[i + 1] == "/dev/shm"))
            i += 1
        elif arg in ("--ro-bind", "--bind"):
            view["mounts"].append(("bind", args[i + 1], args[i + 2], arg == "--ro-bind"))
            i += 2
        elif arg in ("--dev", "--proc"):
            view["mounts"].append((arg[2:], args[i + 1]))
            i += 1
        elif arg == "--setenv":
            view["env"][args[i + 1]] = args[i + 2]
            i += 2
        elif arg.startswith("--reuid=") or arg.startswith("--uid"):
            view["identity"].add(("uid", int(arg.split("=")[1]) if "=" in arg else int(args[i + 1])))
        elif arg.endswith('exec "$@"'):   # the shell line that starts the kernel
            view["unset"] = {part.split()[1] for part in arg.split(";") if part.strip().startswith("unset ")}
        i += 1
    view["identity"] |= set(args) & {"--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--clear-groups"}
    view["identity"] |= {("readonly", args[i + 1]) for i, arg in enumerate(args) if arg == "--remount-ro"}
    if not as_root:   # bubblewrap in a user namespace of its own drops every capability itself
        view["identity"] |= {"--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--clear-groups"}
    view["namespaces"].discard("user")
    return view


def warm_view(policy: Policy) -> dict:
    """What the warm child will do for the same policy (autograder.warm.isolate runs exactly these steps)."""
    relay, rest = pol.warm_namespace_flags(policy)
    flags = {name: flag for name, flag in pol.CLONE_FLAGS.items()}
    identity = {("uid", policy.uid), "--clear-groups"}
    if policy.no_new_privs:
        identity.add("--no-new-privs")
    if policy.drop_capabilities:
        identity |= {"--bounding-set=-all", "--inh-caps=-all"}
    if policy.readonly_root:
        identity.add(("readonly", "/"))
    return {"mounts": pol.warm_mount_steps(policy),
            "namespaces": {name for name, flag in flags.items() if (relay | rest) & flag},
            "rlimits": policy.rlimits(), "env": dict(policy.env), "identity": identity, "unset": set(policy.unset_env)}


def differences(policy: Policy, as_root: bool = True) -> list[str]:
    cold = cold_view(pol.cold_command(policy, as_root), as_root)
    warm = warm_view(policy)
    return [f"{key}: cold {cold[key]!r} warm {warm[key]!r}" for key in warm if cold[key] != warm[key]]


@pytest.mark.parametrize("as_root", [True, False])
@pytest.mark.parametrize("variant", [{}, {"mpl_cache": ""}, {"nproc": None, "cgroup_procs": ()}, {"cpus": ""}])
def test_both_mechanisms_take_the_same_steps_from_one_policy(variant, as_root):
    assert differences(example(**variant), as_root) == []


def _without(args: list[str], flag: str, before: int = 0) -> list[str]:
    at = args.index(flag)
    return args[:at - before] + args[at + 1:]


COLD_EDITS = {
    "/dev/shm's tmpfs": lambda args: _without(args, "/dev/shm", before=5),
    "the network namespace": lambda args: _without(args, "--unshare-net"),
    "RLIMIT_NOFILE": lambda args: [a for a in args if not a.startswith("--nofile=")],
    "no_new_privs": lambda args: _without(args, "--no-new-privs"),
    "the read-only root": lambda args: [a for i, a in enumerate(args)
                                        if "--remount-ro" not in (a, args[i - 1])],
    "unsetting PWD": lambda args: [a.replace("unset PWD; ", "") for a in args],
}
WARM_EDITS = {
    "a read-only root": lambda view: {**view, "mounts": [s for s in view["mounts"] if "/opt/venv" not in s]},
    "/dev/shm's tmpfs": lambda view: {**view, "mounts": [s for s in view["mounts"] if "/dev/shm" not in s]},
    "the capability drop": lambda view: {**view, "identity": view["identity"] - {"--bounding-set=-all"}},
    "the environment": lambda view: {**view, "env": {}},
}


@pytest.mark.parametrize("step", sorted(COLD_EDITS))
def test_the_comparison_fails_when_the_cold_side_drops_a_step(step):
    """Removing one step from bubblewrap's command line, the way a careless edit would, is caught."""
    policy = example()
    args = COLD_EDITS[step](pol.cold_command(policy, True))
    assert cold_view(args, True) != warm_view(policy), f"dropping {step} from the cold side went unseen"


@pytest.mark.parametrize("step", sorted(WARM_EDITS))
def test_the_comparison_fails_when_the_warm_side_drops_a_step(step):
    policy = example()
    assert cold_view(pol.cold_command(policy, True), True) != WARM_EDITS[step](warm_view(policy))


def test_a_warm_translation_that_skips_a_mount_kind_is_caught():
    """The same through the real function: warm_mount_steps patched to lose every tmpfs."""
    real = pol.warm_mount_steps
    with mock.patch.object(pol, "warm_mount_steps", lambda p: [s for s in real(p) if s[0] != "tmpfs"]):
        assert differences(example())


def test_a_policy_travels_as_a_versioned_message():
    policy = example()
    assert Policy.from_message(policy.to_message()) == policy
    import json

    assert Policy.from_message(json.loads(json.dumps(policy.to_message()))) == policy


@pytest.mark.parametrize("change, reason", [
    (lambda m: {**m, "version": pol.VERSION + 1}, "version"),
    (lambda m: {k: v for k, v in m.items() if k != "nproc"}, "missing ['nproc']"),
    (lambda m: {**m, "extra": 1}, "unknown ['extra']"),
    (lambda m: {**m, "namespaces": ["pid", "time"]}, "unknown namespaces"),
    (lambda m: ["not", "a", "dict"], "must be a dict"),
])
def test_a_message_this_code_cannot_read_is_refused(change, reason):
    with pytest.raises(PolicyError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        Policy.from_message(change(example().to_message()))


def test_a_warm_child_refuses_a_message_of_another_version(tmp_path):
    """The relay reports why (SandboxFailed) and never starts the kernel (the grader then refuses the warm start)."""
    import os

    from autograder.warm import isolate

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            isolate.launch({**example().to_message(), "version": 0}, write, lambda: os._exit(99))
        finally:
            os._exit(3)
    os.close(write)
    answer = os.read(read, 4096)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    failed = decode_one_of(answer, SandboxFailed)
    assert failed.reason.startswith("PolicyError") and "version 0" in failed.reason, failed
    assert os.waitstatus_to_exitcode(status) == 1


def test_the_grader_builds_one_policy_for_both_kernels(tmp_path):
    """sandbox.command_prefix (cold) and sandbox.warm_spec (warm) come from the same sandbox.policy."""
    limits = Limits(timeout_s=10, cell_timeout_s=5, memory_mb=900, output_mb=1, threads=1, sandbox=True,
                    processes=64, disk_mb=50, cpus="0", mpl_cache="")
    work, runtime = tmp_path / "work", tmp_path / "run"
    with mock.patch.object(sandbox, "running_as_root", lambda: True), \
            mock.patch.object(sandbox, "_process_cap", lambda n: n + 5):
        warm = Policy.from_message(sandbox.warm_spec(work, runtime, limits, []))
        cold = sandbox.command_prefix(work, runtime, limits)
    assert cold_view(cold, True) == {**warm_view(warm), "mounts": cold_view(cold, True)["mounts"]}
    assert cold_view(cold, True)["mounts"] == pol.warm_mount_steps(warm)
    assert warm.nproc == 69 and warm.work == str(work) and Path(warm.roots[0]).is_absolute()
