"""The grader's end of a kernel's channel: the kernel manager that starts the kernel inside the sandbox, and
the notebook client that reads what it sends under caps (output, flood, nesting, lines) and stops a kernel
that ignores the interrupt after a cell's timeout. Everything the kernel sends is the student's: data to
count and keep or drop, never an instruction.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from queue import Empty

import nbformat
import psutil
import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from traitlets import DottedObjectName, List, Type

from autograder.grading import private_apis
from autograder.grading.isolate import sandbox
from autograder.grading.plan.settings import (
    CELL_LINE_LIMIT,
    FLOOD_FACTOR,
    INTERRUPT_GRACE_S,
    KERNEL_STARTUP_S,
    KILL_FACTOR,
    MAX_OBSERVATIONS,
    MAX_OUTPUT_DEPTH,
    Limits,
)
from autograder.kernel import outputcap
from autograder.kernel.vocabulary import protocol
from autograder.warm.provisioner import SANDBOX_ARG, ColdStartRefused, ForkingProvisioner

# ---------------------------------------------------------------- reading what the kernel sends

HISTORY = "--HistoryManager.hist_file"   # IPython's history: in memory, as nbclient gives python3 kernels
KERNEL_CLASS = "--IPKernelApp.kernel_class="
NO_DEBUGGER = "autograder.kernel.nodebugger.Kernel"   # named, not imported: it marks debugpy missing
UNREADABLE = "pte_unreadable"   # what a message part the grader cannot decode becomes


def read_message_part(data):
    """jupyter_client's ``Session.unpacker`` for the grader's sessions: JSON, as jupyter_client reads it,
    except that a part the decoder cannot take (nested too deep for its recursion, not JSON at all) becomes
    a placeholder that :class:`GradingClient` drops. The kernel is the student's: what it sends is data."""
    try:
        return json.loads(data)
    except (RecursionError, ValueError):
        return {"msg_id": "", "msg_type": UNREADABLE, UNREADABLE: True}


def too_deep(value, limit: int = MAX_OUTPUT_DEPTH) -> bool:
    """Do lists and dicts nest in ``value`` more than ``limit`` levels (counted level by level, without
    recursion: recursion is what the deep value would break)?"""
    level, depth = [value], 0
    while True:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        level = [child for c in containers for child in (c.values() if isinstance(c, dict) else c)]


class ReadyClient(AsyncKernelClient):
    """jupyter_client's client, ready as soon as the kernel has answered ``kernel_info`` and IOPub delivers.

    The stock ``wait_for_ready`` then waits for 0.2 s of IOPub silence, to drop start-up messages that
    nbclient filters by their parent message anyway: a fifth of a second of every kernel start, idle. Its
    sockets retry a connection every 10 ms, not 100: the client connects before the kernel has bound."""

    RECONNECT_MS = 10

    def start_channels(self, *args, **kwargs):
        self.context.setsockopt(zmq.RECONNECT_IVL, self.RECONNECT_MS)   # a default for the sockets made next
        super().start_channels(*args, **kwargs)

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.2)   # IOPub connected: the request's status
                except Empty:
                    pass   # not yet subscribed: ask again
                else:
                    private_apis.get(private_apis.KERNEL_INFO_REPLY, self)(reply)
                    return
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel runs inside its sandbox, or does not run.

    Cold: the kernel command runs inside the sandbox prefix (bubblewrap). Warm (``sandboxed``): no prefix; the
    sandbox spec is the ``pte_sandbox`` argument of ``start_kernel`` and the forking provisioner's child makes
    the sandbox. A kernelspec is found by name on the Jupyter path, so which provisioner starts the kernel is
    not the grader's to assume: ``_async_launch_kernel`` checks it before anything is started (fails closed)."""

    client_class = DottedObjectName(f"{__name__}.ReadyClient")
    # AsyncKernelManager makes its clients with client_factory, whose default is its own class: a
    # client_class alone never reached km.client(), and every grading kernel waited out the stock wait
    client_factory = Type(ReadyClient, klass=AsyncKernelClient)
    prefix = List([])
    sandboxed = False   # a warm kernel: no prefix, its sandbox made by the template's child


    def format_kernel_cmd(self, extra_arguments=None):
        # the kernel caps each cell's output itself (autograder.kernel.outputcap), before memory grows
        cmd = list(self.prefix) + super().format_kernel_cmd(extra_arguments)
        cmd.append(f"--IPKernelApp.extensions={outputcap.__name__}")
        # the grader's kernel class, whatever the kernelspec names (pte-warm names the same one; traitlets refuses
        # the option twice): see autograder/kernel/nodebugger.py
        cmd = [arg for arg in cmd if not arg.startswith(KERNEL_CLASS)] + [f"{KERNEL_CLASS}{NO_DEBUGGER}"]
        if not any(arg.startswith(HISTORY) for arg in cmd):
            # nbclient asks for it only for kernels named python3 (its KernelManager.ipykernel), not pte-warm:
            # a warm kernel would otherwise create and commit an SQLite file (a tenth of its start-up)
            cmd.append(f"{HISTORY}=:memory:")
        return cmd

    async def interrupt_kernel(self):
        """SIGINT to the kernel itself: the sandbox's own processes (bwrap) would die of it."""
        if self.sandboxed:   # the provisioner's process is the kernel (forked: its command line is the template's)
            try:
                self.provisioner.process.send_signal(signal.SIGINT)
            except (AttributeError, OSError):
                pass
            return
        for proc in kernel_family(self):
            try:
                if proc.cmdline()[1:3] == ["-m", "ipykernel_launcher"]:
                    proc.send_signal(signal.SIGINT)
                    return
            except psutil.Error:
                continue

    private_apis.get(private_apis.LAUNCH_KERNEL)   # the override below guards every start: renamed, nothing starts

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        """Refuse, before the provisioner starts anything, a start that would not be sandboxed; after a warm start,
        refuse a kernel its provisioner does not report sandboxed with the spec asked for. (jupyter_client's
        override point: "override in a subclass to launch kernel subprocesses differently".) Warm refusals raise
        ColdStartRefused, so the runner starts the kernel cold inside bubblewrap; a cold one is an error."""
        spec = kw.get(SANDBOX_ARG)
        found = (self.kernel_spec.metadata.get("kernel_provisioner", {}).get("provisioner_name", "local-provisioner")
                 if self.kernel_spec else "?")
        where = f"the kernelspec {self.kernel_name!r} ({getattr(self.kernel_spec, 'resource_dir', '?')})"
        if self.sandboxed:
            if spec is None:
                raise ColdStartRefused("a warm kernel asked for without its sandbox spec")
            if type(self.provisioner) is not ForkingProvisioner:
                raise ColdStartRefused(f"{where} names the provisioner {found!r} "
                                       f"({type(self.provisioner).__name__}), not the forking one (pte-forking)")
        else:   # cold: jupyter_client's own provisioner (or the forking one, which starts this command cold)
            if type(self.provisioner) not in (LocalProvisioner, ForkingProvisioner) or spec is not None:
                raise RuntimeError(f"{where} names the provisioner {found!r}, which the grader does not trust to "
                                   "run its sandbox prefix")
            if list(kernel_cmd[:len(self.prefix)]) != list(self.prefix):
                raise RuntimeError(f"{where}: the kernel's command does not start with the sandbox prefix")
        await super()._async_launch_kernel(kernel_cmd, **kw)
        if self.sandboxed and self.provisioner.sandbox != spec:
            kill_kernel_tree(self)
            raise ColdStartRefused(f"{where}: the provisioner did not report a kernel sandboxed as asked")

    def write_connection_file(self, **kwargs):
        result = super().write_connection_file(**kwargs)
        if sandbox.running_as_root() and (self.sandboxed or (self.prefix and "bwrap" in self.prefix)):
            os.chown(self.connection_file, sandbox.NOBODY, sandbox.NOBODY)
        return result


class GradingClient(NotebookClient):
    """nbclient with an output cap that counts every message a cell sends, display updates and widget
    traffic included. Past the cap, outputs are dropped (one note says so) and execution goes on.
    A cell that keeps printing to ``FLOOD_FACTOR`` times the cap is interrupted: left alone, the
    kernel's unsent output grows until the memory cap kills it, which says nothing useful."""

    FLOOD_FACTOR, KILL_FACTOR = FLOOD_FACTOR, KILL_FACTOR
    flood_killed = False
    output_limit = 2_000_000
    output_used = 0
    output_exceeded = False
    flooded = False
    cell_line_limit = CELL_LINE_LIMIT
    dropped = 0          # messages not kept: unreadable, or nested deeper than MAX_OUTPUT_DEPTH

    idle_seen = 0        # the kernel's "idle" statuses so far: one follows every cell it finished
    unresponsive = False   # a cell timed out and its kernel ignored the interrupt: it was killed

    def process_message(self, msg, cell, cell_index):
        content = msg.get("content")
        if msg["msg_type"] == UNREADABLE or not isinstance(content, dict) or content.get(UNREADABLE) or too_deep(
                content):
            self.dropped += 1   # a student's message nbformat, nbgrader or the report could not write back
            return None
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
                elif not _is_observation(msg) or len(protocol.observations_in(cell.outputs)) > MAX_OBSERVATIONS:
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
    return msg["msg_type"] == "display_data" and protocol.is_observation(
        {"output_type": "display_data", "data": msg.get("content", {}).get("data")})


def _truncate_streams(outs, max_lines: int) -> None:
    """Keep the first ``max_lines`` lines of a cell's stream output, as nbgrader's LimitOutput does."""
    for out in outs:
        if out.get("output_type") == "stream" and out.text.count("\n") > max_lines:
            lines = out.text.splitlines(keepends=True)
            out.text = "".join(lines[:max_lines]) + f"[grader] ... {len(lines) - max_lines} more lines not kept\n"


def kernel_process(km) -> psutil.Process | None:
    """The kernel's root process: the one place the grader reads the provisioner's ``process`` (the Popen of
    the wrapped command). jupyter_client offers no public pid of a local kernel, and the grader must signal
    and kill the kernel itself, not the sandbox's processes around it."""
    try:
        proc = km.provisioner.process
        return psutil.Process(proc.pid)
    except Exception:  # the kernel is gone or not started yet
        return None


def kernel_family(km) -> list:
    """The kernel's process and its descendants (empty when there is no process)."""
    root = kernel_process(km)
    if root is None:
        return []
    try:
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return [root]


def kill_kernel_tree(km) -> None:
    for proc in kernel_family(km):
        try:
            proc.kill()
        except psutil.Error:
            pass


def _error_output(ename: str, evalue: str):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def make_client(nb, km, limits: Limits, work: Path) -> GradingClient:
    """The notebook client: a slow cell is interrupted and the notebook goes on (the notebook's own clock is
    the watchdog's); every message type counts towards the output cap."""
    client = GradingClient(nb, km=km, timeout=int(limits.cell_timeout_s), allow_errors=True,
                           interrupt_on_timeout=True, startup_timeout=KERNEL_STARTUP_S, kernel_name="python3",
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
    # nbclient has no public hook for what happens after a cell's timeout: its _async_handle_timeout is wrapped
    # here, and only here, to stop a kernel that ignores the interrupt (it answers no more cells anyway).
    original_timeout = private_apis.get(private_apis.HANDLE_TIMEOUT, client)

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

    setattr(client, private_apis.HANDLE_TIMEOUT.name, on_timeout)
    return client
