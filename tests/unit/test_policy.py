"""One sandbox policy, two mechanisms, both observed: the warm child's real steps (``warm/isolate.py``) run against a
recording fake of the system calls, and the real cold command line (``policy.cold_command``) read with a model of
what bubblewrap, setpriv, prlimit and taskset do (tests/support/sandbox_views.py; the model is checked against a
real bubblewrap below, where one runs as root). Their effects must be equal, mount flags included. One-line
drifts planted on a scratch copy of either side's source each make the comparison fail
(tests/e2e/test_sandbox_parity.py compares what a real kernel then sees).

The policy is the only source: the cold kernel's cgroups, its CPU set and ``--sandbox none``'s limits come from it,
and a CPU set that cannot be applied stops the kernel (PolicyError), never silently dropped."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

import pytest
import sandbox_views as views

from autograder.grading.isolate import policy as pol
from autograder.grading.isolate import sandbox
from autograder.grading.isolate.policy import Policy, PolicyError
from autograder.grading.messages import SandboxFailed, decode_one_of
from autograder.grading.plan.settings import Limits
from autograder.warm import isolate, rootfs


def example(**changes) -> Policy:
    base = Policy(work="/g/run 1/work", runtime="/g/run 1/run", roots=("/usr", "/opt/venv", "/tmp/course/data"),
                  disk_bytes=64 << 20, data_bytes=1 << 30, fsize_bytes=8 << 20, nofile=256, nproc=80, cpus="1",
                  mpl_cache="/var/cache/mpl", cgroup_procs=("/sys/fs/cgroup/pids/pte/k1/cgroup.procs",))
    return dataclasses.replace(base, **changes)


def compared(policy: Policy, cold_module=pol, warm_module=isolate, rootfs_module=rootfs) -> list[str]:
    cold = views.cold_effects(cold_module.cold_command(policy, True))
    return views.differences(cold, views.warm_effects(policy, module=warm_module, rootfs=rootfs_module))


VARIANTS = {"as built": {}, "no font cache": {"mpl_cache": ""}, "no cgroups": {"nproc": None, "cgroup_procs": ()},
            "no CPU set": {"cpus": ""},
            "two cgroups, CPUs 0-2,5": {"cgroup_procs": ("/a/cgroup.procs", "/b c/cgroup.procs"), "cpus": "0-2,5"}}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_both_mechanisms_do_the_same_for_one_policy(variant):
    assert compared(example(**VARIANTS[variant])) == []


def test_what_is_compared_is_all_there():
    """The comparison is not empty on either side: each kind of effect is seen."""
    warm = views.warm_effects(example())
    assert {"/dev", "/dev/pts", "/proc", "/tmp", "/dev/shm", "/usr", "/g/run 1/run", "/dev/null"} <= set(
        warm["mounts"])
    assert warm["mounts"]["/usr"][2:] == (frozenset({"ro", "nosuid", "nodev"}),) * 2   # its submounts too
    assert warm["mounts"]["/dev/shm"][2] == frozenset({"nosuid", "nodev"})   # as bubblewrap's: executable
    assert warm["namespaces"] == {"pid", "net", "ipc", "uts", "cgroup", "mount"}
    assert warm["caps_emptied"] == {"bounding", "inheritable", "ambient", "effective", "permitted"}
    assert warm["rlimits"] == example().rlimits() and warm["cpus"] == {1} and warm["uid"] == 65534
    assert warm["env_unset"] == {"PWD"} and warm["env_set"] == {"JPY_PARENT_PID": "1"} and warm["loopback_up"]
    assert warm["cgroups"] == {"/sys/fs/cgroup/pids/pte/k1/cgroup.procs"} and warm["root"][1] >= {"ro"}


# --- ten (and two) one-line drifts, each planted on a scratch copy of one side's source ---------------------------
WARM_DRIFTS = {   # in autograder/warm/rootfs.py (PID 1's new root) or autograder/warm/isolate.py (the processes)
    "warm: a tmpfs without nodev (a flag)": (rootfs, 'mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size',
                                             'mount("tmpfs", target, "tmpfs", MS_NOSUID, f"size'),
    "warm: no devpts in /dev (a mount)": (rootfs, '    syscalls.mount("devpts", f"{target}/pts"',
                                          '    0 and syscalls.mount("devpts", f"{target}/pts"'),
    "warm: submounts left writable (a flag)": (rootfs, "for point in [target, *_submounts(target)]:",
                                               "for point in [target]:"),
    "warm: the last rlimit skipped (an rlimit)": (isolate, "for name, value in sandbox.rlimits().items():",
                                                  "for name, value in list(sandbox.rlimits().items())[:-1]:"),
    "warm: the bounding set kept (the capability drop)": (isolate, "            syscalls.prctl(PR_CAPBSET_DROP, cap)",
                                                          "            pass"),
    "warm: PWD left set (an environment step)": (isolate, "        env.pop(name, None)", "        pass"),
}
POLICY_DRIFTS = {   # in autograder/grading/isolate/policy.py: the warm side's table, or the cold command line
    "warm: no network namespace (a namespace)": ('        if name != "pid":', '        if name not in ("pid", "net"):'),
    "cold: --bind for --ro-bind (a flag)": ('return ["--ro-bind", mount.source, mount.target]',
                                            'return ["--bind", mount.source, mount.target]'),
    "cold: no IPC namespace (a namespace)": ('"ipc": "--unshare-ipc"', '"ipc": None'),
    "cold: no RLIMIT_FSIZE (an rlimit)": ('*(f"{PRLIMIT_OPTIONS[name]}={value}" for name, value in rlimits.items()), '
                                          '"--"]',
                                          '*(f"{PRLIMIT_OPTIONS[name]}={value}" for name, value in rlimits.items() '
                                          'if name != "RLIMIT_FSIZE"), "--"]'),
    "cold: no --inh-caps=-all (the capability drop)": ('drop += ["--bounding-set=-all", "--inh-caps=-all"]',
                                                       'drop += ["--bounding-set=-all"]'),
    "cold: no --setenv (an environment step)": ('        args += ["--setenv", name, value]', '        pass'),
    "cold: the root left writable (a mount flag)": ('        args += ["--remount-ro", "/"]', '        pass'),
}


def scratch_copy(module: types.ModuleType, old: str, new: str) -> types.ModuleType:
    """``module`` loaded again from its source with the one line ``old`` changed to ``new``."""
    source = Path(module.__file__).read_text()
    assert source.count(old) == 1, f"the drift's line is not in {module.__name__} once: {old!r}"
    copy = types.ModuleType(module.__name__ + "_drifted")
    copy.__file__ = module.__file__
    sys.modules[copy.__name__] = copy   # its dataclasses look their module up there
    exec(compile(source.replace(old, new), module.__file__, "exec"), copy.__dict__)
    return copy


@pytest.mark.parametrize("drift", sorted(WARM_DRIFTS))
def test_a_drift_of_the_warm_child_is_caught(drift):
    module, old, new = WARM_DRIFTS[drift]
    drifted = scratch_copy(module, old, new)
    if module is rootfs:
        assert compared(example(), rootfs_module=drifted)
    else:
        assert compared(example(), warm_module=drifted)


@pytest.mark.parametrize("module", [isolate, rootfs], ids=["isolate", "rootfs"])
def test_a_scratch_copy_without_a_drift_compares_equal(module):
    """The drifts alone make the differences above: a scratch copy with its line unchanged runs the same steps."""
    old = next(old for owner, old, _ in WARM_DRIFTS.values() if owner is module)
    copy = scratch_copy(module, old, old)
    assert compared(example(), **{"warm_module" if module is isolate else "rootfs_module": copy}) == []


@pytest.mark.parametrize("drift", sorted(POLICY_DRIFTS))
def test_a_drift_of_a_translation_is_caught(drift):
    drifted = scratch_copy(pol, *POLICY_DRIFTS[drift])
    if drift.startswith("warm"):   # the warm child imported the table by name
        with mock.patch.object(isolate, "warm_namespace_flags", drifted.warm_namespace_flags):
            assert compared(example())
    else:
        assert compared(example(), cold_module=drifted)


# --- the cold model, checked against a real bubblewrap ------------------------------------------------------------
REAL_PROBE = ("import json, os, resource; print(json.dumps({'mountinfo': open('/proc/self/mountinfo').read(), "
              "'status': open('/proc/self/status').read(), 'cwd': os.getcwd(), 'env': dict(os.environ), "
              "'cpus': sorted(os.sched_getaffinity(0)), 'limits': {n: resource.getrlimit(getattr(resource, n))[0] "
              "for n in ('RLIMIT_DATA', 'RLIMIT_FSIZE', 'RLIMIT_CORE', 'RLIMIT_NOFILE', 'RLIMIT_NPROC')}}))")


def _mount_flags(mountinfo: str) -> dict[str, frozenset]:
    found = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")
        found[point] = frozenset(set(fields[5].split(",")) & {"ro", "nosuid", "nodev", "noexec"})
    return found


@pytest.mark.skipif(os.geteuid() != 0 or not sandbox.sandbox_available() or not shutil.which("setpriv"),
                    reason="a real bubblewrap run as root is needed to check the model")
def test_the_cold_model_is_what_a_real_bubblewrap_does(tmp_path):
    work, runtime = tmp_path / "work 1", tmp_path / "run"
    for folder in (work, runtime):
        folder.mkdir()
        os.chown(folder, 65534, 65534)
    roots = tuple(r for r in ("/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", sys.base_prefix, sys.prefix)
                  if os.path.exists(r))
    policy = Policy(work=str(work), runtime=str(runtime), roots=roots, disk_bytes=8 << 20, data_bytes=2 << 30,
                    fsize_bytes=4 << 20, nofile=200, nproc=4000, cpus="0")
    argv = pol.cold_command(policy, True) + [sys.executable, "-S", "-c", REAL_PROBE]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    real = json.loads(done.stdout)
    model = views.cold_effects(pol.cold_command(policy, True))
    flags = _mount_flags(real["mountinfo"])
    for target, (_, _, own, sub) in model["mounts"].items():
        if target.startswith("/proc/") and target not in flags:
            continue   # bubblewrap covers a /proc folder only where it is writable
        assert flags[target] == own, (target, flags[target], own)
        for point in (p for p in flags if p.startswith(target + "/") and p not in model["mounts"]):
            assert flags[point] >= (sub or frozenset()), (point, flags[point], sub)
    assert flags["/"] == model["root"][1]
    status = dict(line.split(":", 1) for line in real["status"].splitlines())
    emptied = {name for name, key in (("bounding", "CapBnd"), ("inheritable", "CapInh"), ("ambient", "CapAmb"),
                                      ("effective", "CapEff"), ("permitted", "CapPrm")) if int(status[key], 16) == 0}
    assert emptied == model["caps_emptied"] and status["NoNewPrivs"].strip() == "1"
    assert status["Uid"].split()[0] == str(model["uid"]) and status["Groups"].strip() == ""
    assert real["limits"] == model["rlimits"] and set(real["cpus"]) == model["cpus"]
    assert real["cwd"] == model["cwd"] and "PWD" not in real["env"]
    assert all(real["env"][k] == v for k, v in model["env_set"].items())


# --- the policy is the only source --------------------------------------------------------------------------------
def test_a_cpu_set_that_cannot_be_applied_stops_the_kernel():
    """Without taskset, a CPU set asked for is a PolicyError (the cold pinning was silently dropped before)."""
    with pytest.raises(PolicyError, match="taskset"):
        pol.cold_command(example(), True, have_taskset=False)
    with pytest.raises(PolicyError, match="taskset"):
        pol.unsandboxed_command(example(), have_taskset=False)
    assert pol.cold_command(example(cpus=""), True, have_taskset=False)   # none asked for: nothing to apply


def _limits(**changes) -> Limits:
    base = Limits(timeout_s=10, cell_timeout_s=5, memory_mb=900, output_mb=1, threads=1, sandbox=True,
                  processes=64, disk_mb=50, cpus="0", mpl_cache="")
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("sandboxed", [True, False])
def test_the_grader_refuses_a_cpu_set_it_cannot_apply(tmp_path, sandboxed):
    real_which = shutil.which
    with mock.patch.object(sandbox.shutil, "which", lambda name: None if name == "taskset" else real_which(name)):
        with pytest.raises(PolicyError):
            sandbox.command_prefix(tmp_path, tmp_path, _limits(sandbox=sandboxed))


def test_a_cold_run_without_taskset_stops_with_the_reason(tmp_path):
    """runner.execute: no kernel starts, the run is an error that says why (fail closed)."""
    import nbformat

    from autograder.grading.run import runner
    from autograder.grading.status import Status

    real_which = shutil.which
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    with mock.patch.object(sandbox.shutil, "which", lambda name: None if name == "taskset" else real_which(name)), \
            mock.patch.object(sandbox, "cap_runtime", lambda runtime: "not mounted here"):
        run = runner.execute(nb, _limits(sandbox=False), tmp_path)
    assert run.status == Status.ERROR and "taskset" in run.reason, (run.status, run.reason)


def test_cold_cgroups_and_unsandboxed_limits_come_from_the_policy(tmp_path):
    """The cold kernel joins the policy's cgroups (a failed write stops it: ``&&``); --sandbox none's limits are
    the policy's rlimits (less RLIMIT_NPROC: it would count the grader's own user)."""
    procs = [str(tmp_path / "a" / "cgroup.procs"), str(tmp_path / "b" / "cgroup.procs")]
    with mock.patch.object(sandbox, "running_as_root", lambda: True):
        cold = sandbox.command_prefix(tmp_path, tmp_path, _limits(), procs)
        built = sandbox.policy(tmp_path, tmp_path, _limits(), procs)
    assert views.cold_effects(cold)["cgroups"] == set(procs) and cold[:2] == ["sh", "-c"] and " && " in cold[2]
    bare = views.cold_effects(sandbox.command_prefix(tmp_path, tmp_path, _limits(sandbox=False)))
    assert bare["rlimits"] == {k: v for k, v in built.rlimits().items() if k != "RLIMIT_NPROC"}
    assert bare["cpus"] == {0} and not bare["mounts"] and not bare["namespaces"]
    joined = subprocess.run(cold[:4 + len(procs)] + ["true"], capture_output=True)   # no such group: refused
    assert joined.returncode != 0


def test_the_grader_builds_one_policy_for_both_kernels(tmp_path):
    """sandbox.command_prefix (cold) and sandbox.warm_spec (warm) come from the same sandbox.policy."""
    work, runtime = tmp_path / "work", tmp_path / "run"
    procs = [str(tmp_path / "g" / "cgroup.procs")]
    with mock.patch.object(sandbox, "running_as_root", lambda: True), \
            mock.patch.object(sandbox, "_process_cap", lambda n: n + 5):
        warm = Policy.from_message(sandbox.warm_spec(work, runtime, _limits(), procs))
        cold = sandbox.command_prefix(work, runtime, _limits(), procs)
    assert views.differences(views.cold_effects(cold), views.warm_effects(warm)) == []
    assert warm.nproc is None and warm.work == str(work) and Path(warm.roots[0]).is_absolute()


# --- the policy as a message ----------------------------------------------------------------------------------------
def test_a_policy_travels_as_a_versioned_message():
    policy = example()
    assert Policy.from_message(policy.to_message()) == policy
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


def test_a_warm_child_refuses_a_message_of_another_version():
    """The relay reports why (SandboxFailed) and never starts the kernel (the grader then refuses the warm start)."""
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
