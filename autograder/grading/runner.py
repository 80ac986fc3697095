"""Execute one canonical notebook in a sandboxed kernel, under limits, with sealed test cells."""
from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets import List

from . import canonical, sandbox

SEAL = re.compile(r"\n?PTE-SEAL:([0-9a-f]+)\n")
MEMORY_ERROR = re.compile(r"MemoryError|can't allocate memory|DefaultCPUAllocator|Cannot allocate memory")


@dataclass
class Limits:
    timeout_s: float = 600.0        # the whole notebook
    cell_timeout_s: float = 120.0   # one cell
    memory_mb: int = 3072
    output_mb: float = 2.0          # all outputs of the notebook together
    threads: int = 1
    sandbox: bool = True


@dataclass
class Outcome:
    status: str = "graded"
    reason: str = ""
    nb: nbformat.NotebookNode | None = None
    seconds: float = 0.0
    execution_seconds: float = 0.0
    findings: list[str] = field(default_factory=list)


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel command runs inside the sandbox prefix."""

    prefix = List([])

    def format_kernel_cmd(self, extra_arguments=None):
        return list(self.prefix) + super().format_kernel_cmd(extra_arguments)

    def write_connection_file(self, **kwargs):
        result = super().write_connection_file(**kwargs)
        if sandbox.running_as_root() and self.prefix and "bwrap" in self.prefix:
            os.chown(self.connection_file, sandbox.NOBODY, sandbox.NOBODY)
        return result


class GradingClient(NotebookClient):
    """nbclient with an output cap; everything else is nbclient's own execution."""

    output_limit = 2_000_000
    output_used = 0
    output_exceeded = False

    def output(self, outs, msg, display_id, cell_index):
        size = len(str(msg.get("content", "")))
        self.output_used += size
        if self.output_used > self.output_limit:
            if not self.output_exceeded:
                self.output_exceeded = True
                if self.km is not None:
                    kill_kernel_tree(self.km)
            return None
        return super().output(outs, msg, display_id, cell_index)



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
    """Kills the kernel when the notebook's wall clock or memory cap is exceeded."""

    def __init__(self, km, limits: Limits):
        super().__init__(daemon=True)
        self.km, self.limits = km, limits
        self.deadline = time.monotonic() + limits.timeout_s
        self.tripped: str | None = None
        self.peak_mb = 0.0
        self._stop = threading.Event()

    def run(self):
        cap = self.limits.memory_mb
        while not self._stop.wait(0.05):
            if time.monotonic() > self.deadline:
                self.tripped = "timeout"
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
                self.tripped = "memory-limit"
                kill_kernel_tree(self.km)
                return

    def stop(self):
        self._stop.set()


def _error_output(ename: str, evalue: str):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _stream_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def _strip_seals(cell) -> None:
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            out.text = SEAL.sub("", out.text)
    cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and not o.text)]


async def _run(nb, limits: Limits, work: Path, runtime: Path, outcome: Outcome, deleted: set[str]) -> None:
    use_bwrap = limits.sandbox
    km = SandboxedKernelManager(kernel_name="python3", transport="ipc", ip=str(runtime / "kernel"))
    km.connection_file = str(runtime / "kernel.json")
    km.prefix = sandbox.command_prefix(work, runtime, limits.memory_mb, use_bwrap)
    client = GradingClient(nb, km=km, timeout=int(limits.cell_timeout_s), allow_errors=True,
                           interrupt_on_timeout=False, startup_timeout=60, kernel_name="python3",
                           resources={"metadata": {"path": str(work)}}, record_timing=False)
    client.output_limit = int(limits.output_mb * 1_000_000)
    replies: dict[int, str] = {}
    client.on_cell_executed = lambda cell, cell_index, execute_reply, **_: replies.__setitem__(
        cell_index, execute_reply["content"]["status"])

    test_cells = {i for i, c in enumerate(nb.cells)
                  if canonical._meta(c).get("grade") and c.cell_type == "code"}
    nonces: dict[int, str] = {}
    originals: dict[int, str] = {}
    stopped_at: int | None = None
    watchdog = None
    started = time.monotonic()
    try:
        async with client.async_setup_kernel(env=sandbox.kernel_env(work, limits.threads)):
            watchdog = Watchdog(km, limits)
            watchdog.start()
            boot = await client.kc._async_execute_interactive(
                "import autograder.grading.guard as _pte_guard; _pte_guard.install(); del _pte_guard",
                store_history=False, timeout=60, output_hook=lambda msg: None)
            if boot["content"]["status"] != "ok":
                raise RuntimeError("the grading guard could not be installed in the kernel")
            started = time.monotonic()
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                grade_id = canonical._meta(cell).get("grade_id")
                if index in test_cells:
                    if grade_id in deleted:
                        continue
                    reset_nonce = secrets.token_hex(8)
                    seen: list[str] = []
                    await client.kc._async_execute_interactive(
                        f"__import__('autograder.grading.guard', fromlist=['restore']).restore('{reset_nonce}')",
                        store_history=False, timeout=30,
                        output_hook=lambda msg: seen.append(msg.get("content", {}).get("text", "")))
                    if f"PTE-SEAL:{reset_nonce}" not in "".join(seen):
                        outcome.findings.append(f"the kernel state could not be restored before '{grade_id}'")
                    nonces[index] = secrets.token_hex(8)
                    originals[index] = cell.source
                    cell.source = (f"{cell.source}\n__import__('autograder.grading.guard', "
                                   f"fromlist=['seal']).seal('{nonces[index]}')")
                try:
                    await client.async_execute_cell(cell, index)
                finally:
                    if index in originals:
                        cell.source = originals[index]
                if client.output_exceeded or (watchdog and watchdog.tripped):
                    stopped_at = index
                    break
    except CellTimeoutError:
        outcome.status, outcome.reason = "timeout", f"a cell ran longer than {limits.cell_timeout_s:g} s"
        stopped_at = _current_index(nb, replies)
    except DeadKernelError:
        stopped_at = _current_index(nb, replies)
        if not (watchdog and watchdog.tripped) and not client.output_exceeded:
            outcome.status, outcome.reason = "kernel-died", "the kernel died (the notebook exited or crashed it)"
    except Exception as exc:  # anything else that stops the run: reported, never raised to the batch
        if watchdog and watchdog.tripped:
            stopped_at = _current_index(nb, replies)
        else:
            outcome.status, outcome.reason = "error", f"grading failed: {type(exc).__name__}: {exc}"[:300]
            stopped_at = _current_index(nb, replies)
    finally:
        if watchdog:
            watchdog.stop()
        kill_kernel_tree(km)
        outcome.execution_seconds = time.monotonic() - started
    if watchdog and watchdog.tripped == "timeout":
        outcome.status, outcome.reason = "timeout", f"the notebook ran longer than {limits.timeout_s:g} s"
    elif watchdog and watchdog.tripped == "memory-limit":
        outcome.status, outcome.reason = "memory-limit", f"the kernel used more than {limits.memory_mb} MB"
    elif client.output_exceeded and outcome.status == "graded":
        outcome.status, outcome.reason = "error", f"the notebook printed more than {limits.output_mb:g} MB of output"

    _settle_test_cells(nb, test_cells, nonces, replies, stopped_at, deleted, outcome)


def _current_index(nb, replies) -> int:
    done = max(replies) if replies else -1
    for index in range(done + 1, len(nb.cells)):
        if nb.cells[index].cell_type == "code":
            return index
    return len(nb.cells)


def _settle_test_cells(nb, test_cells, nonces, replies, stopped_at, deleted, outcome) -> None:
    """Decide each test cell's verdict and make the notebook say it the way nbgrader reads it."""
    for index in sorted(test_cells):
        cell = nb.cells[index]
        grade_id = canonical._meta(cell).get("grade_id")
        cell.source = canonical.strip_hidden_tests(cell.source)
        for out in cell.get("outputs", []):
            if out.output_type == "error":  # frames would show hidden test code
                out.traceback = [f"{out.ename}: {out.evalue}"]
        if grade_id in deleted:
            cell.outputs = [_error_output("DeletedCell", "this graded cell was deleted from the submission; it counts as zero")]
            continue
        if index not in nonces or (stopped_at is not None and index >= stopped_at and index not in replies):
            cell.outputs = list(cell.get("outputs", [])) + [
                _error_output("NotRun", f"not run: {outcome.reason or outcome.status}")]
            continue
        sealed = f"PTE-SEAL:{nonces[index]}" in _stream_text(cell)
        _strip_seals(cell)
        has_error = any(o.output_type == "error" for o in cell.outputs)
        if replies.get(index) == "ok" and not sealed:
            outcome.findings.append(f"test cell '{grade_id}' did not run to its end (its code was altered at run time)")
            cell.outputs.append(_error_output("TamperingDetected", "this test cell did not run to its end"))
        elif replies.get(index) != "ok" and not has_error:
            cell.outputs.append(_error_output("TestFailed", "the test cell failed (its error display was suppressed)"))
    text = "".join(o.get("evalue", "") + o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    if outcome.status == "graded" and MEMORY_ERROR.search(text):
        outcome.status, outcome.reason = "memory-limit", "an allocation failed at the memory cap"


def execute(nb, limits: Limits, scratch: Path, deleted: set[str] | None = None) -> Outcome:
    """Run ``nb`` (modified in place) and return its outcome; never raises for submission faults."""
    outcome = Outcome(nb=nb)
    work, runtime = sandbox.prepare_dirs(scratch)
    mpl_cache = Path(os.environ.get("PTE_MPL_CACHE", ""))
    if mpl_cache.is_dir():
        shutil.copytree(mpl_cache, work / ".matplotlib", dirs_exist_ok=True)
        if sandbox.running_as_root():
            for path in [work / ".matplotlib", *(work / ".matplotlib").rglob("*")]:
                os.chown(path, sandbox.NOBODY, sandbox.NOBODY)
    start = time.monotonic()
    asyncio.run(_run(nb, limits, work, runtime, outcome, deleted or set()))
    outcome.seconds = time.monotonic() - start
    return outcome
