"""Execute one canonical notebook in a sandboxed kernel, under limits, and judge its test cells.

The kernel runs in recording mode (``PTE_OBSERVE=record``): hidden checks publish what the
student's code produced. After the run, each graded test cell is judged outside the kernel
(:mod:`autograder.grading.judge`) and the notebook is rewritten so that nbgrader reads the
verdict: a failed test cell carries an error output, a passed one carries none, and no
test cell keeps an ``execute_result`` (nbgrader would read a number there as partial credit).
"""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from traitlets import List

from ..kernel import observations, outputcap, protocol
from . import canonical, cgroups, judge, sandbox
from .status import Status

MEMORY_ERROR = re.compile(r"MemoryError|can't allocate memory|DefaultCPUAllocator|Cannot allocate memory")


@dataclass
class Limits:
    """What one kernel runs under. Built by ``settings.Settings.limits()``, where the defaults live."""
    timeout_s: float                # the whole notebook
    cell_timeout_s: float           # one cell
    memory_mb: int
    output_mb: float                # all outputs of the notebook together
    threads: int
    sandbox: bool
    processes: int                  # processes and threads of the kernel
    disk_mb: int                    # size of each tmpfs the kernel writes (work folder, /tmp, runtime folder)
    cpus: str = ""                  # CPU list for this kernel, e.g. "1"; "" = no pinning (set per job)


@dataclass
class Outcome:
    status: Status = Status.GRADED
    reason: str = ""
    nb: nbformat.NotebookNode | None = None
    seconds: float = 0.0
    execution_seconds: float = 0.0
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel command runs inside the sandbox prefix."""

    prefix = List([])

    def format_kernel_cmd(self, extra_arguments=None):
        # the kernel caps each cell's output itself (autograder.kernel.outputcap), before memory grows
        return (list(self.prefix) + super().format_kernel_cmd(extra_arguments)
                + [f"--IPKernelApp.extensions={outputcap.__name__}"])

    async def interrupt_kernel(self):
        """SIGINT to the kernel itself: the sandbox's own processes (bwrap) would die of it."""
        root = kernel_process(self)
        if root is None:
            return
        try:
            family = [root] + root.children(recursive=True)
        except psutil.Error:
            family = [root]
        for proc in family:
            try:
                if proc.cmdline()[1:3] == ["-m", "ipykernel_launcher"]:
                    proc.send_signal(signal.SIGINT)
                    return
            except psutil.Error:
                continue

    def write_connection_file(self, **kwargs):
        result = super().write_connection_file(**kwargs)
        if sandbox.running_as_root() and self.prefix and "bwrap" in self.prefix:
            os.chown(self.connection_file, sandbox.NOBODY, sandbox.NOBODY)
        return result


class GradingClient(NotebookClient):
    """nbclient with an output cap that counts every message a cell sends, display updates and widget
    traffic included. Past the cap, outputs are dropped (one note says so) and execution goes on.
    A cell that keeps printing to ``FLOOD_FACTOR`` times the cap is interrupted: left alone, the
    kernel's unsent output grows until the memory cap kills it, which says nothing useful."""

    FLOOD_FACTOR = 10
    KILL_FACTOR = 5      # times the flood limit: a kernel still sending then is killed
    flood_killed = False
    output_limit = 2_000_000
    output_used = 0
    output_exceeded = False
    flooded = False
    cell_line_limit = 1000

    idle_seen = 0        # the kernel's "idle" statuses so far: one follows every cell it finished
    unresponsive = False   # a cell timed out and its kernel ignored the interrupt: it was killed

    def process_message(self, msg, cell, cell_index):
        if msg["msg_type"] == "status" and msg.get("content", {}).get("execution_state") == "idle":
            self.idle_seen += 1
        if msg["msg_type"] not in ("status", "execute_input"):
            self.output_used += _message_size(msg)
            if self.output_used > self.output_limit and msg["msg_type"] not in ("clear_output",):
                # the note goes to the report, never into a cell's streams (stderr in a graded cell scores 0)
                self.output_exceeded = True
                flood = self.FLOOD_FACTOR * self.output_limit
                if self.output_used > flood and not self.flooded:
                    self.flooded = True
                    cell.outputs.append(_error_output(
                        "OutputFlood", f"this cell printed more than {flood / 1e6:g} MB and was interrupted"))
                    asyncio.ensure_future(self.km.interrupt_kernel())
                if self.output_used > self.KILL_FACTOR * flood and not self.flood_killed:
                    self.flood_killed = True     # it ignored the interrupt and its own cap: nothing more is read
                    kill_kernel_tree(self.km)
                if self.output_used > flood:
                    return None   # past the flood limit nothing is kept, observations and errors included
                if msg["msg_type"] == "error":
                    msg = _shrunk_error(msg)     # kept (it decides the cell) but small
                elif not _is_observation(msg) or len(judge.observed(cell)) > judge.MAX_OBSERVATIONS:
                    return None
        return super().process_message(msg, cell, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        out = super().output(outs, msg, display_id, cell_index)
        _truncate_streams(outs, self.cell_line_limit)
        return out


def _message_size(msg) -> int:
    """Roughly how many characters a message carries (counted without building one more copy of it)."""
    content = msg.get("content", {})
    if not isinstance(content, dict):
        return len(str(content))
    total = 0
    for value in content.values():
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, dict):
            total += sum(len(v) if isinstance(v, str) else len(str(v)) for v in value.values())
        elif isinstance(value, list):
            total += sum(len(v) if isinstance(v, str) else len(str(v)) for v in value)
        else:
            total += len(str(value))
    return total


def _shrunk_error(msg):
    """An error message past the output cap: its name and the start of its text, no traceback."""
    content = msg.get("content", {})
    small = {"ename": str(content.get("ename", ""))[:100], "evalue": str(content.get("evalue", ""))[:1000],
             "traceback": []}
    return dict(msg, content=small)


def _is_observation(msg) -> bool:
    """A hidden check's observation: it is kept past the output cap, or the judge would fail honest
    answers whose earlier cells printed a lot (it still counts towards the flood limit)."""
    return msg["msg_type"] == "display_data" and observations.MIME in msg.get("content", {}).get("data", {})


def _truncate_streams(outs, max_lines: int) -> None:
    """Keep the first ``max_lines`` lines of a cell's stream output, as nbgrader's LimitOutput does."""
    for out in outs:
        if out.get("output_type") == "stream" and out.text.count("\n") > max_lines:
            lines = out.text.splitlines(keepends=True)
            out.text = "".join(lines[:max_lines]) + f"[grader] ... {len(lines) - max_lines} more lines not kept\n"


def kernel_process(km) -> psutil.Process | None:
    try:
        proc = km.provisioner.process  # the Popen of the wrapped command
        return psutil.Process(proc.pid)
    except Exception:  # the kernel is gone or not started yet
        return None


def kill_kernel_tree(km) -> None:
    root = kernel_process(km)
    if root is None:
        return
    try:
        family = [root] + root.children(recursive=True)
    except psutil.Error:
        family = [root]
    for proc in family:
        try:
            proc.kill()
        except psutil.Error:
            pass


class Watchdog(threading.Thread):
    """Kills the kernel when the notebook's wall clock or memory cap is exceeded.

    It looks ten times a second: each look lists the host's processes to find the kernel's (1.5 to 2 ms of
    CPU here), and the kernel's memory cgroup, with headroom, stops whatever grows faster than that."""

    INTERVAL_S = 0.1

    def __init__(self, km, limits: Limits):
        super().__init__(daemon=True)
        self.km, self.limits = km, limits
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
                rss = sum(p.memory_info().rss for p in [root] + root.children(recursive=True)) / 2**20
            except psutil.Error:
                continue
            self.peak_mb = max(self.peak_mb, rss)
            if rss > cap:
                self.tripped = Status.MEMORY_LIMIT
                kill_kernel_tree(self.km)
                return

    def stop(self):
        self._stop.set()


def _error_output(ename: str, evalue: str):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


INTERRUPT_GRACE_S = 5.0   # at least this long (a quarter of the cell cap if more) to answer an interrupt


def _client(nb, km, limits: Limits, work: Path) -> GradingClient:
    """The notebook client: a slow cell is interrupted and the notebook goes on (the notebook's own clock is
    the watchdog's); every message type counts towards the output cap."""
    client = GradingClient(nb, km=km, timeout=int(limits.cell_timeout_s), allow_errors=True,
                           interrupt_on_timeout=True, startup_timeout=60, kernel_name="python3",
                           resources={"metadata": {"path": str(work)}}, record_timing=False,
                           error_on_timeout={"ename": "CellTimeout", "traceback": [],
                                             "evalue": f"the cell ran longer than {limits.cell_timeout_s:g} s "
                                                       "and was interrupted"})
    client.output_limit = int(limits.output_mb * 1_000_000)
    # After a cell's reply nbclient waits only iopub_timeout (4 s by default) for the rest of its output and
    # then drops it: a cell that printed a lot would lose its last messages, observations included. The
    # kernel caps each cell's output, so waiting as long as the cell may run is bounded.
    client.iopub_timeout = max(4, int(limits.cell_timeout_s))
    client.replies = {}
    client.on_cell_executed = lambda cell, cell_index, execute_reply, **_: client.replies.__setitem__(
        cell_index, (execute_reply or {}).get("content", {}).get("status", "error"))
    client.timed_out = []
    original_timeout = client._async_handle_timeout

    async def on_timeout(timeout, cell=None):
        client.timed_out.append(1)
        if cell is not None:
            cell.outputs.append(_error_output("CellTimeout", f"this cell ran longer than {limits.cell_timeout_s:g} s "
                                                             "and was interrupted by the grader"))
        seen = client.idle_seen
        reply = await original_timeout(timeout, cell)   # the interrupt
        # A kernel that takes the interrupt is idle at once. One that ignores it would make every later cell
        # wait out its own timeout until the notebook's clock ran out: it is stopped now, with the same scores.
        deadline = time.monotonic() + max(INTERRUPT_GRACE_S, limits.cell_timeout_s / 4)
        while client.idle_seen == seen and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if client.idle_seen == seen:
            client.unresponsive = True
            kill_kernel_tree(km)
            raise DeadKernelError("the kernel ignored the interrupt")
        return reply

    client._async_handle_timeout = on_timeout
    return client


async def _run(nb, limits: Limits, work: Path, runtime: Path, outcome: Outcome,
               reference: dict[str, list[dict]] | None) -> None:
    """Execute ``nb`` in a sandboxed kernel; with a ``reference``, judge its test cells (else keep the raw run)."""
    km = SandboxedKernelManager(kernel_name="python3", transport="ipc", ip=str(runtime / "kernel"))
    km.connection_file = str(runtime / "kernel.json")
    groups = _kernel_groups(runtime, limits, outcome)
    km.prefix = ((groups.join_prefix() if groups else [])
                 + sandbox.command_prefix(work, runtime, limits, cgroup=groups is not None))
    client = _client(nb, km, limits, work)
    test_cells = {i for i, c in enumerate(nb.cells) if protocol.nbgrader_meta(c).get("grade") and c.cell_type == "code"}
    stopped_at: int | None = None
    hidden_runs: dict[int, tuple[list, str | None]] = {}
    watchdog = None
    started = time.monotonic()
    try:
        env = dict(sandbox.kernel_env(work, limits.threads),
                   **{outputcap.ENV: str(int(client.FLOOD_FACTOR * client.output_limit))})
        async with client.async_setup_kernel(env=env):
            watchdog = Watchdog(km, limits)
            watchdog.start()
            started = time.monotonic()
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                if index in test_cells:
                    await _run_test_cell(client, cell, index, client.replies, hidden_runs)
                else:
                    await client.async_execute_cell(cell, index)
                if watchdog.tripped:
                    stopped_at = index
                    break
    except Exception as exc:  # the kernel died, or anything else that stops the run: never raised to the batch
        stopped_at = _current_index(nb, client.replies)
        if not (watchdog and watchdog.tripped) and not client.unresponsive:
            outcome.status, outcome.reason = (
                (Status.KERNEL_DIED, "the kernel died (the notebook exited or crashed it)")
                if isinstance(exc, DeadKernelError) else
                (Status.ERROR, f"grading failed: {type(exc).__name__}: {exc}"[:300]))
    finally:
        if watchdog:
            watchdog.stop()
        kill_kernel_tree(km)
        outcome.execution_seconds = time.monotonic() - started
        oom = groups.oom_killed() if groups else False
        if groups:
            groups.remove()
    _decide_status(outcome, client, nb, limits, watchdog.tripped if watchdog else None, oom)
    if reference is None:   # a reference run: each test cell keeps everything, its observations included
        for index, (outputs, _) in hidden_runs.items():
            nb.cells[index].outputs = list(nb.cells[index].outputs) + list(outputs)
    else:
        _settle_test_cells(nb, test_cells, client.replies, stopped_at, outcome, reference, hidden_runs)


def _decide_status(outcome: Outcome, client: GradingClient, nb, limits: Limits, tripped, oom: bool) -> None:
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


# cgroup memory beyond the watchdog's RSS cap: the kernel's tmpfs folders (counted there) and reclaimable cache
CGROUP_MEMORY_HEADROOM_MB = 512


def _kernel_groups(runtime: Path, limits: Limits, outcome: Outcome):
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


async def _run_test_cell(client, cell, index: int, replies: dict, hidden_runs: dict) -> None:
    """A graded test cell as two executions: the visible checks, then (if they passed) the hidden part.

    The hidden part runs with ``store_history=False`` and into a cell of its own, whose outputs never
    reach feedback: only its observations are read. ``replies[index]`` ends as the cell's overall status."""
    visible, hidden = canonical.split_hidden_tests(cell.source)
    full = cell.source
    cell.source = visible
    try:
        await client.async_execute_cell(cell, index)
    finally:
        cell.source = full
    status = replies.get(index)
    if not hidden.strip() or status != "ok" or any(o.get("output_type") == "error" for o in cell.outputs):
        return
    part = nbformat.v4.new_code_cell(hidden)
    part.metadata = nbformat.from_dict({"tags": list(cell.metadata.get("tags", []))})
    hidden_runs[index] = (part.outputs, None)
    try:
        await client.async_execute_cell(part, index, store_history=False)
    finally:
        client.nb["cells"][index] = cell   # nbclient stores the cell it ran at its index
        hidden_runs[index] = (part.outputs, replies.get(index))
        replies[index] = status if replies.get(index) == "ok" else replies.get(index, "error")


def _current_index(nb, replies) -> int:
    done = max(replies) if replies else -1
    for index in range(done + 1, len(nb.cells)):
        if nb.cells[index].cell_type == "code":
            return index
    return len(nb.cells)


TAINT_NOTE = ("[grader] the outputs of this cell and of every later one are not shown: they were produced after "
              "the hidden tests had run in this kernel, so they could reveal them. Run the notebook yourself "
              "to see them.\n")


def _settle_test_cells(nb, test_cells, replies, stopped_at, outcome, reference, hidden_runs) -> None:
    """Judge each test cell and make the notebook say the verdict the way nbgrader reads it.

    Feedback keeps the kernel's outputs only up to the first hidden part that ran: anything the
    kernel produced from then on (a later cell printing ``In``, the history, frames or objects
    left over) could carry hidden code or hidden inputs. From there on, a test cell shows only
    the grader's own verdict, and other cells show nothing."""
    text = "".join(o.get("evalue", "") + o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    if outcome.status == Status.GRADED and MEMORY_ERROR.search(text):
        outcome.status, outcome.reason = Status.MEMORY_LIMIT, "an allocation failed at the memory cap"
    tainted_after = min(hidden_runs) if hidden_runs else None
    noted = False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or index in test_cells:
            continue
        judge.strip_observations(cell)
        if tainted_after is not None and index > tainted_after:
            cell.outputs = [] if noted else [nbformat.v4.new_output("stream", name="stdout", text=TAINT_NOTE)]
            noted = True
    for index in sorted(test_cells):
        cell = nb.cells[index]
        grade_id = protocol.nbgrader_meta(cell).get("grade_id")
        cell.source = canonical.strip_hidden_tests(cell.source)
        hidden_outputs, hidden_status = hidden_runs.get(index, ([], None))
        payloads = judge.observed({"outputs": hidden_outputs}) + judge.observed(cell)
        judge.strip_observations(cell)
        visible_error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        if tainted_after is not None and index > tainted_after:
            # the visible part ran after hidden code: its text, even an error's name, is not to be trusted
            cell.outputs = []
            if visible_error is not None:
                cell.outputs.append(_error_output("VisibleCheckFailed", "the visible checks of this cell failed "
                                                  "(the message is not shown here: run the cell yourself)"))
        else:
            cell.outputs = [_as_stdout(o) for o in cell.get("outputs", []) if o.output_type != "execute_result"]
            for out in cell.outputs:
                if out.output_type == "error":   # no frames: they would show hidden test code
                    out.traceback = [f"{out.ename}: {out.evalue}"]
        if index not in replies or (stopped_at is not None and index >= stopped_at and index not in replies):
            cell.outputs.append(_error_output("NotRun", f"not run: {outcome.reason or outcome.status}"))
            continue
        hidden_error = any(o.get("output_type") == "error" for o in hidden_outputs)
        finished = replies.get(index) == "ok" and visible_error is None and not hidden_error and (
            index not in hidden_runs or hidden_status == "ok")
        verdict = judge.judge_cell(reference.get(grade_id, []), payloads, finished)
        if not verdict.passed and visible_error is None:
            cell.outputs.append(_error_output("HiddenTestFailed", verdict.reason))
        elif verdict.passed and tainted_after is not None and index > tainted_after:
            cell.outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                                       text="[grader] every check of this test passed\n"))


def _as_stdout(out):
    """A graded cell's stderr stream as stdout: nbgrader scores a graded cell with stderr output 0, and a
    student's warning or debug print must not cost the test's points."""
    if out.get("output_type") == "stream" and out.get("name") == "stderr":
        out = nbformat.from_dict(dict(out, name="stdout"))
    return out


def execute(nb, limits: Limits, scratch: Path, reference: dict[str, list[dict]] | None = None) -> Outcome:
    """Run ``nb`` (modified in place), judge its test cells and return the outcome.

    Never raises for submission faults: they become the outcome's status and reason."""
    return _execute(nb, limits, scratch, reference or {})


def record(nb, limits: Limits, scratch: Path) -> Outcome:
    """Run ``nb`` exactly as :func:`execute` does, but judge nothing: its test cells keep their observations
    (the grader's run of the instructor's solution, whose observations become the host's reference)."""
    return _execute(nb, limits, scratch, None)


def _execute(nb, limits: Limits, scratch: Path, reference) -> Outcome:
    outcome = Outcome(nb=nb)
    work, runtime = sandbox.prepare_dirs(scratch)
    if not limits.sandbox:
        mpl_cache = Path(os.environ.get("PTE_MPL_CACHE", ""))
        if mpl_cache.is_dir():
            shutil.copytree(mpl_cache, work / ".matplotlib", dirs_exist_ok=True)
    capped = sandbox.cap_runtime(runtime) if limits.sandbox else "not sandboxed"
    if limits.sandbox and capped:
        outcome.notes.append(capped)
    start = time.monotonic()
    try:
        asyncio.run(_run(nb, limits, work, runtime, outcome, reference))
    finally:
        if not capped:
            sandbox.release_runtime(runtime)
    outcome.seconds = time.monotonic() - start
    return outcome
