"""Execute one canonical notebook in a sandboxed kernel, under limits, and say what ran.

The kernel runs in recording mode (``PTE_OBSERVE=record``): hidden checks publish what the
student's code produced. :func:`execute` returns a :class:`Run`: the executed notebook, each cell's
reply, the outputs of each test cell's hidden part, and what stopped the run, if anything. Nothing
is judged here: :func:`autograder.grading.judging.judge.settle` decides each test cell and writes the verdict
the way nbgrader reads it.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
from nbclient.exceptions import DeadKernelError

from autograder.grading.isolate import cgroups, sandbox
from autograder.grading.isolate.policy import PolicyError
from autograder.grading.plan.settings import (
    CGROUP_MEMORY_HEADROOM_MB,
    MAX_OUTPUT_DEPTH,
    WATCHDOG_INTERVAL_S,
    Limits,
)
from autograder.grading.run.kernel_client import (
    GradingClient,
    SandboxedKernelManager,
    kernel_process,
    kill_kernel_tree,
    make_client,
    read_message_part,
)
from autograder.grading.status import Status
from autograder.kernel import outputcap
from autograder.kernel.vocabulary import protocol
from autograder.warm import KERNEL_NAME as WARM_KERNEL
from autograder.warm.provisioner import SANDBOX_ARG, ColdStartRefused, template_env

TIMINGS = ("start", "setup", "cells", "figures", "tests", "hidden")


def _has_figure(cell) -> bool:
    return any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


@dataclass
class Run:
    """What ran, judged by nobody yet: the executed notebook (test cells as the kernel left their visible
    part), each code cell's reply status, and the outputs and reply of each test cell's hidden part."""
    nb: nbformat.NotebookNode
    status: Status = Status.GRADED
    reason: str = ""
    test_cells: set[int] = field(default_factory=set)
    replies: dict[int, str] = field(default_factory=dict)
    hidden_runs: dict[int, tuple[list, str | None]] = field(default_factory=dict)
    seconds: float = 0.0
    execution_seconds: float = 0.0
    kernel_start: str = ""          # "warm" (forked from a template) or "cold"
    # where the time went, in seconds: the kernel's start (asked for -> answering), the first code cell (the
    # imports), other cells, cells that drew a figure, test cells' visible parts, their hidden parts
    timings: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIMINGS, 0.0))
    notes: list[str] = field(default_factory=list)
    # the judge's verdict, grade id -> the points it earns (the cell's points when it passed, else 0): what
    # nbgrader must record, checked against the gradebook once it has (reporting.check_verdicts)
    verdicts: dict[str, float] = field(default_factory=dict)

    def test_outputs(self, index: int) -> list:
        """Everything test cell ``index`` produced: its visible part's outputs, then its hidden part's."""
        return list(self.nb.cells[index].get("outputs", [])) + list(self.hidden_runs.get(index, ([], None))[0])


def family_in_group(root: psutil.Process, procs: Path) -> list[psutil.Process]:
    """``root`` and its descendants, looked for among the processes of its cgroup (``procs``, its
    ``cgroup.procs``) instead of among all the host's: a process cannot leave its group, so every descendant
    is listed there."""
    parents = {}
    for pid in map(int, procs.read_text().split()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue   # ended since the list was read
        parents[pid] = int(stat[stat.rindex(")") + 2:].split()[1])
    family, found = [root], {root.pid}
    while grown := [pid for pid, parent in parents.items() if parent in found and pid not in found]:
        found.update(grown)
        family.extend(psutil.Process(pid) for pid in grown)
    return family


class Watchdog(threading.Thread):
    """Kills the kernel when the notebook's wall clock or memory cap is exceeded.

    It looks ten times a second. Where the kernel has its own cgroup (``members``, its ``cgroup.procs``), each
    look reads the few processes listed there; otherwise it lists the host's processes to find the kernel's
    (1.5 ms of CPU with 70 processes on the host, several with a test suite's hundreds). The kernel's memory
    cgroup, with headroom, stops whatever grows faster than that."""

    INTERVAL_S = WATCHDOG_INTERVAL_S

    def __init__(self, km, limits: Limits, members: Path | None = None):
        super().__init__(daemon=True)
        self.km, self.limits, self.members = km, limits, members
        self.deadline = time.monotonic() + limits.timeout_s
        self.tripped: str | None = None
        self.peak_mb = 0.0
        self._stop = threading.Event()

    def run(self):
        cap = self.limits.memory_mb
        while not self._stop.wait(self.INTERVAL_S):
            if time.monotonic() > self.deadline:
                self.tripped = Status.TIMEOUT
                kill_kernel_tree(self.km)
                return
            root = kernel_process(self.km)
            if root is None:
                continue
            try:
                rss = sum(p.memory_info().rss for p in self.family(root)) / 2**20
            except psutil.Error:
                continue
            self.peak_mb = max(self.peak_mb, rss)
            if rss > cap:
                self.tripped = Status.MEMORY_LIMIT
                kill_kernel_tree(self.km)
                return

    def family(self, root: psutil.Process) -> list[psutil.Process]:
        if self.members is not None:
            try:
                return family_in_group(root, self.members)
            except OSError:
                pass   # the group cannot be read: the host's list, as without one
        return [root] + root.children(recursive=True)

    def stop(self):
        self._stop.set()


def warm_unavailable(limits: Limits) -> str | None:
    """Why this run's kernels start cold, or None when they are forked from a template."""
    if not limits.warm:
        return "--kernels cold"
    if not limits.sandbox:
        return "--sandbox none: a warm child makes its sandbox itself, and there is none to make"
    from autograder.warm import isolate

    return isolate.available()


def template_env_for(limits: Limits) -> dict | None:
    """The environment of the template this run's warm kernels fork from (to start it early), or None."""
    if warm_unavailable(limits) is not None:
        return None
    return template_env(sandbox.kernel_env(Path("/nonexistent"), limits.threads), {"mpl_cache": limits.mpl_cache})


async def _run(run: Run, limits: Limits, work: Path, runtime: Path, warm: bool) -> None:
    """Execute ``run.nb`` in a sandboxed kernel; each test cell as its visible part, then its hidden part.
    ``warm``: forked from a template, the child making its own sandbox; ColdStartRefused when it cannot."""
    nb = run.nb
    km = SandboxedKernelManager(kernel_name=WARM_KERNEL if warm else "python3", transport="ipc",
                                ip=str(runtime / "kernel"))
    km.connection_file = str(runtime / "kernel.json")
    km.session.unpacker = f"{__name__}.{read_message_part.__name__}"   # jupyter_client's documented option
    groups = _kernel_groups(runtime, limits, run)
    procs = [str(p) for p in groups.procs] if groups else []
    if warm:
        km.sandboxed = True   # the prefix stays empty: the forking provisioner's child builds the same sandbox
    else:
        try:   # cgroups, CPU set, limits and sandbox: all from the one policy
            km.prefix = sandbox.command_prefix(work, runtime, limits, procs)
        except PolicyError as refused:   # asked for and not applicable here: no kernel starts (fail closed)
            run.status, run.reason = Status.ERROR, f"the kernel's sandbox cannot be made here: {refused}"[:300]
            if groups:
                groups.remove()
            return
    client = make_client(nb, km, limits, work)
    client.replies = run.replies
    run.test_cells = {i for i, c in enumerate(nb.cells) if protocol.is_test_cell(c)}
    watchdog = None
    started = time.monotonic()
    try:
        env = dict(sandbox.kernel_env(work, limits.threads),
                   **{outputcap.ENV: str(int(client.FLOOD_FACTOR * client.output_limit))})
        start = {"env": env}
        if warm:   # an argument of start_kernel, for the forking provisioner only (see kernel_client)
            start[SANDBOX_ARG] = sandbox.warm_spec(work, runtime, limits, procs)
        async with client.async_setup_kernel(**start):
            run.kernel_start = "warm" if warm else "cold"
            run.timings["start"] = time.monotonic() - started
            watchdog = Watchdog(km, limits, groups.memory / "cgroup.procs" if groups else None)
            watchdog.start()
            started = time.monotonic()
            first = True
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                began = time.monotonic()
                if index in run.test_cells:
                    hidden = await _run_test_cell(client, cell, index, run.replies, run.hidden_runs)
                    run.timings["hidden"] += hidden
                    run.timings["tests"] += time.monotonic() - began - hidden
                else:
                    await client.async_execute_cell(cell, index)
                    kind = "setup" if first else "figures" if _has_figure(cell) else "cells"
                    run.timings[kind] += time.monotonic() - began
                first = False
                if watchdog.tripped:
                    break
    except ColdStartRefused:
        raise   # nothing of the student's ran: execute() starts the kernel cold
    except Exception as exc:  # the kernel died, or anything else that stops the run: never raised to the batch
        if warm and not run.kernel_start:   # the warm kernel never answered: nothing of the student's ran
            raise ColdStartRefused(f"the warm kernel did not start: {type(exc).__name__}: {exc}") from exc
        if not (watchdog and watchdog.tripped) and not client.unresponsive:
            _stopped_by(run, exc)
    finally:
        if watchdog:
            watchdog.stop()
        kill_kernel_tree(km)
        run.execution_seconds = time.monotonic() - started
        await _release(client, km)
        oom = groups.oom_killed() if groups else False
        if groups:
            groups.remove()
    _decide_status(run, client, nb, limits, watchdog.tripped if watchdog else None, oom)


def _stopped_by(run: Run, exc: Exception) -> None:
    """The status of a run an exception stopped. Its message stays in the grader's log: it may carry what the
    kernel sent (feedback shows the reason), so the reason names the exception's type alone."""
    if isinstance(exc, DeadKernelError):
        run.status, run.reason = Status.KERNEL_DIED, "the kernel died (the notebook exited or crashed it)"
        return
    run.status, run.reason = Status.ERROR, f"grading failed: {type(exc).__name__} (its message is in the grader's log)"
    print(f"pte-grade: grading failed: {type(exc).__name__}: {exc}"[:2000], file=sys.stderr)


async def _release(client: GradingClient, km) -> None:
    """Close what the notebook's client holds in this process once its kernel is dead. The grader hands nbclient
    its own kernel manager, so nbclient stops nothing itself: each notebook left a ZMQ context (with its
    I/O thread), five sockets that went on reconnecting to the dead kernel ten times a second, and a heartbeat
    thread, so a worker slowed down and held more threads and files with every notebook it graded."""
    try:
        if client.kc is not None:
            client.kc.stop_channels()
        await km.cleanup_resources()   # connection and IPC files, the control socket, the ZMQ context
    except Exception:  # the kernel is dead and its verdict taken: a failed clean-up changes no grade
        pass


def _decide_status(outcome: Run, client: GradingClient, nb, limits: Limits, tripped, oom: bool) -> None:
    """The notebook's status from what stopped it, the gravest first."""
    if client.flood_killed:
        outcome.status = Status.OUTPUT_LIMIT
        killed_at = client.KILL_FACTOR * client.FLOOD_FACTOR * limits.output_mb
        outcome.reason = f"a cell kept sending output past {killed_at:g} MB after an interrupt; its kernel was stopped"
    elif oom and tripped != Status.TIMEOUT:
        outcome.status = Status.MEMORY_LIMIT
        outcome.reason = f"the kernel passed its memory limit ({limits.memory_mb} MB)"
    elif tripped == Status.TIMEOUT:
        outcome.status, outcome.reason = Status.TIMEOUT, f"the notebook ran longer than {limits.timeout_s:g} s"
    elif tripped == Status.MEMORY_LIMIT:
        outcome.status, outcome.reason = Status.MEMORY_LIMIT, f"the kernel used more than {limits.memory_mb} MB"
    elif client.unresponsive:
        outcome.status = Status.TIMEOUT
        outcome.reason = (f"a cell ran longer than {limits.cell_timeout_s:g} s and its kernel ignored the interrupt; "
                          "the kernel was stopped and the cells after it did not run")
    elif (client.flooded or _stopped_by_output_cap(nb)) and outcome.status == Status.GRADED:
        outcome.status = Status.OUTPUT_LIMIT
        outcome.reason = (f"a cell printed more than {client.FLOOD_FACTOR * limits.output_mb:g} MB "
                          "and was interrupted")
    elif client.timed_out and outcome.status == Status.GRADED:
        outcome.status = Status.TIMEOUT
        outcome.reason = (f"{len(client.timed_out)} cell(s) ran longer than {limits.cell_timeout_s:g} s and were "
                          "interrupted")
    if client.output_exceeded:
        outcome.notes.append(f"output past {limits.output_mb:g} MB was dropped")
    if client.dropped:
        outcome.notes.append(f"{client.dropped} message(s) of the kernel were not kept: nested deeper than "
                             f"{MAX_OUTPUT_DEPTH} levels, or not readable JSON")


def _kernel_groups(runtime: Path, limits: Limits, outcome: Run):
    """The kernel's own cgroups (CPU set, memory, processes), or None where the host cannot make them."""
    if not limits.sandbox:
        return None
    kind, why = cgroups.available()
    if kind is None:
        outcome.notes.append(f"no per-kernel cgroups ({why}): taskset and prlimit limits only")
        return None
    try:
        return cgroups.create(f"{os.getpid()}-{runtime.parent.name}", limits.cpus,
                              (limits.memory_mb + 2 * limits.disk_mb + sandbox.RUNTIME_MB
                               + CGROUP_MEMORY_HEADROOM_MB) * 2**20,
                              limits.processes)
    except OSError as exc:
        outcome.notes.append(f"no per-kernel cgroups ({exc}): taskset and prlimit limits only")
        return None


def _stopped_by_output_cap(nb) -> bool:
    """Did the kernel's own per-cell cap stop a cell (an ``OutputFlood`` error)?"""
    return any(out.get("output_type") == "error" and out.get("ename") == outputcap.OutputFlood.__name__
               for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", []))


async def _run_test_cell(client, cell, index: int, replies: dict, hidden_runs: dict) -> float:
    """A graded test cell as two executions: the visible checks, then (if they passed) the hidden part.

    The hidden part runs with ``store_history=False`` and into a cell of its own, whose outputs never
    reach feedback: only its observations are read. ``replies[index]`` ends as the cell's overall status.
    Returns the seconds the hidden part took."""
    visible, hidden = protocol.split_hidden(cell.source)
    full = cell.source
    cell.source = visible
    try:
        await client.async_execute_cell(cell, index)
    finally:
        cell.source = full
    status = replies.get(index)
    if not hidden.strip() or status != "ok" or any(o.get("output_type") == "error" for o in cell.outputs):
        return 0.0
    part = nbformat.v4.new_code_cell(hidden)
    part.metadata = nbformat.from_dict({"tags": list(cell.metadata.get("tags", []))})
    hidden_runs[index] = (part.outputs, None)
    began = time.monotonic()
    try:
        await client.async_execute_cell(part, index, store_history=False)
        return time.monotonic() - began
    finally:
        client.nb["cells"][index] = cell   # nbclient stores the cell it ran at its index
        hidden_runs[index] = (part.outputs, replies.get(index))
        replies[index] = status if replies.get(index) == "ok" else replies.get(index, "error")


def _reset(run: Run, work: Path) -> None:
    """Forget a warm attempt that ran nothing (its kernel never started), before the cold one."""
    for cell in run.nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    run.replies.clear()
    run.hidden_runs.clear()
    for entry in work.iterdir():
        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)


def execute(nb, limits: Limits, scratch: Path) -> Run:
    """Run ``nb`` (modified in place) and return what ran. Never raises for submission faults: they become
    the run's status and reason."""
    run = Run(nb=nb)
    work, runtime = sandbox.prepare_dirs(scratch)
    if not limits.sandbox and limits.mpl_cache and Path(limits.mpl_cache).is_dir():
        shutil.copytree(limits.mpl_cache, work / ".matplotlib", dirs_exist_ok=True)
    capped = sandbox.cap_runtime(runtime) if limits.sandbox else "not sandboxed"
    if limits.sandbox and capped:
        run.notes.append(capped)
    start = time.monotonic()
    why_cold = warm_unavailable(limits)
    try:
        if why_cold is None:
            try:
                asyncio.run(_run(run, limits, work, runtime, warm=True))
            except ColdStartRefused as refused:
                why_cold = str(refused)
                run.notes.append(f"cold kernel: {why_cold}"[:300])
                _reset(run, work)
        if why_cold is not None:
            asyncio.run(_run(run, limits, work, runtime, warm=False))
    finally:
        if not capped:
            sandbox.release_runtime(runtime)
    run.seconds = time.monotonic() - start
    return run
