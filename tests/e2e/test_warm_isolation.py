"""Nothing passes from one warm child to the next: each channel, tried by a submission, with an honest
neighbour graded from the same template, after it or beside it.

The grading command forks each kernel from a template (autograder/warm); the child makes its own sandbox
(autograder/warm/isolate.py, its new root autograder/warm/rootfs.py) before it runs anything of the
student's. Each test runs twice:

- ``per-child``: the grading command's design; the channel must be closed;
- ``without``: the same channel on a design that shares what the test checks, and the test must see it
  open (so each test can fail). For what lives in the kernel's memory (a monkeypatch of torch, ``builtins``
  or ``autograder.kernel``) that design is one kernel reused by both submissions, as a pool of pre-started
  kernels would do: a fork alone already separates memory. For everything else it is the template's child
  without the per-child step (``PTE_WARM_TEST_NO_ISOLATION=1``): a fork of the template as root, on the
  host's file system and namespaces.

The kernels run through ``runner.execute``, the grading command's own path (cgroups, watchdog, limits).
What a submission does as root on the ``without`` design is kept harmless: markers in this test's folders
and the venv (removed after), and signals only to processes that carry this module's token in their
environment block (the templates of this module and their children).

The last three tests are about the grading command itself, not a channel between submissions: a warm start
that fails (a template that cannot fork, a kernel that never answers) means a cold kernel in bubblewrap, and what
a graded notebook leaves open in the grading process. Two of their kernels, one cold and one warm, also show
that the grader's kernels start without the debugger. A template killed by a submission costs nothing: the next
one is graded alike (``test_signals_reach_neither_the_template_nor_a_sibling``, ``without``).
"""
from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import psutil
import pytest

from autograder.grading.isolate import sandbox
from autograder.grading.plan.settings import Limits
from autograder.grading.run import runner
from autograder.grading.status import Status
from autograder.warm import isolate, pool

TOKEN = f"pte-isolation-{uuid.uuid4().hex[:12]}"   # in the templates' environment, so in every child's block
DESIGNS = ("per-child", "without")
MEMORY_MB = 768

pytestmark = pytest.mark.skipif(isolate.available() is not None or not sandbox.sandbox_available(),
                                reason=f"warm sandboxed kernels need root and bubblewrap here: {isolate.available()}")

FIND = f"""
import os
def family():
    mine, pid = {{os.getpid()}}, os.getpid()
    while pid > 1:
        pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        mine.add(pid)
    return mine
def others():
    '''Processes outside this kernel's own line whose environment block carries the token.'''
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in family():
            try:
                if b"{TOKEN}" in open(f"/proc/{{name}}/environ", "rb").read():
                    found.append(int(name))
            except OSError:
                pass
    return found
def visible():
    '''Every process this kernel can see, its own line left out.'''
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in family()]
"""


def limits(**extra) -> Limits:
    return Limits(timeout_s=120, cell_timeout_s=60, memory_mb=MEMORY_MB, output_mb=2, threads=1, sandbox=True,
                  processes=128, disk_mb=64, warm=True, **extra)


@pytest.fixture
def design(request, monkeypatch):
    """Every kernel of this module carries TOKEN; ``without`` adds the test hook that skips the per-child step."""
    name = request.param
    original = sandbox.kernel_env
    extra = {"PTE_WARM_TEST_RUN": TOKEN}
    if name == "without":
        extra[isolate.TEST_HOOK] = "1"
    monkeypatch.setattr(sandbox, "kernel_env", lambda *a, **k: {**original(*a, **k), **extra})
    yield name


class Grader:
    """Submissions graded one after another (or beside each other) through runner.execute."""

    def __init__(self, base: Path):
        self.base, self.count = base, 0

    def run(self, cells: list[str], **extra) -> runner.Run:
        self.count += 1
        scratch = self.base / f"nb-{self.count}"
        scratch.mkdir(parents=True)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
        return runner.execute(nb, limits(**extra), scratch)

    def beside(self, cells: list[str]):
        """Start a submission in a thread; returns (thread, result list, its scratch folder)."""
        result: list[runner.Run] = []
        scratch = self.base / f"nb-{self.count + 1}"   # before the thread counts it
        thread = threading.Thread(target=lambda: result.append(self.run(cells)), daemon=True)
        thread.start()
        return thread, result, scratch


def text(run: runner.Run) -> str:
    return "".join(out.get("text", "") for cell in run.nb.cells for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream")


def answer(run: runner.Run, key: str) -> str:
    """The value the notebook printed as ``key=value``."""
    for line in text(run).splitlines():
        if line.startswith(key + "="):
            return line.split("=", 1)[1]
    raise AssertionError(f"no {key}= in {text(run)!r} ({run.status}: {run.reason}; {run.notes})")


def template_pids() -> list[int]:
    return [t.pid for t in pool._templates.values() if t.alive()]


@pytest.fixture
def grader(tmp_path):
    yield Grader(tmp_path / "scratch")
    for proc in psutil.process_iter(["cmdline"]):   # what a submission left running on the weak design
        if proc.info["cmdline"] and TOKEN in " ".join(proc.info["cmdline"]):
            proc.kill()


HONEST = ["import torch, builtins\nfrom autograder.kernel import checks\n"
          "print('seed=' + torch.manual_seed.__module__)\nprint('len=' + str(len([1, 2, 3])))\n"
          "print('checks=' + str(getattr(checks, 'PTE_PATCHED', 'clean')) + getattr(builtins, 'PTE_PATCHED', ''))\n"
          "print('zeros=' + str(torch.zeros(2).tolist()))"]

MONKEYPATCH = ["import torch, builtins\nfrom autograder.kernel import checks\n"
               "torch.manual_seed = lambda *a, **k: None\ntorch.manual_seed.__module__ = 'patched'\n"
               "builtins.PTE_PATCHED = '+builtins'\nchecks.PTE_PATCHED = 'patched'\n"
               "torch.zeros = lambda *a, **k: torch.ones(*a, **k)"]


@pytest.mark.parametrize("design", DESIGNS, indirect=True)
def test_a_monkeypatch_stays_in_its_kernel(design, grader):
    if design == "per-child":
        grader.run(MONKEYPATCH)
        honest = grader.run(HONEST)
        assert honest.kernel_start == "warm", honest.notes
    else:   # one kernel reused by both submissions: what a fork alone already prevents
        honest = grader.run(MONKEYPATCH + HONEST)
    leaked = {key: answer(honest, key) for key in ("seed", "checks", "zeros")}
    clean = {"seed": "torch.random", "checks": "clean", "zeros": "[0.0, 0.0]"}
    print(design, "neighbour saw:", leaked)   # pytest -s: what each design gave (quoted in the notes)
    assert (leaked == clean) == (design == "per-child"), leaked


def writes(scratch_parent: Path, venv_marker: Path) -> list[str]:
    return ["import os, sys\nfor path in ['/tmp/" + TOKEN + "', os.path.expanduser('~/" + TOKEN + "'), "
            f"'{venv_marker}', '{scratch_parent}/{TOKEN}', '/dev/shm/{TOKEN}']:\n"
            "    try:\n        open(path, 'w').write('left by the first submission')\n"
            "    except OSError as error:\n        print('refused', path, error.errno)"]


def reads(scratch_parent: Path, venv_marker: Path) -> list[str]:
    return ["import os, glob\nseen = [p for p in ['/tmp/" + TOKEN + "', '" + str(venv_marker) + "', "
            f"'{scratch_parent}/{TOKEN}', '/dev/shm/{TOKEN}'] if os.path.exists(p)]\n"
            f"seen += glob.glob('{scratch_parent}/*/work/{TOKEN}') + glob.glob('{scratch_parent}/*/work/*/{TOKEN}')\n"
            "print('seen=' + repr(seen))"]


@pytest.mark.parametrize("design", DESIGNS, indirect=True)
def test_files_written_reach_no_one(design, grader):
    venv_marker = Path(sys.prefix) / TOKEN
    try:
        grader.run(writes(grader.base, venv_marker))
        honest = grader.run(reads(grader.base, venv_marker))
        seen = eval(answer(honest, "seen"))
        print(design, "neighbour saw:", seen)
        assert (seen == []) == (design == "per-child"), seen
        assert not venv_marker.exists() or design == "without"
        assert not (Path("/tmp") / TOKEN).exists() or design == "without"
    finally:
        for path in (venv_marker, Path("/tmp") / TOKEN, Path("/dev/shm") / TOKEN):
            path.unlink(missing_ok=True)


LEAVE = ["import subprocess, threading, time, os\n"
         f"subprocess.Popen(['sh', '-c', 'sleep 300; echo {TOKEN}'], start_new_session=True)\n"
         f"def keep():\n    while True:\n        open('/tmp/{TOKEN}-thread', 'w').write('x')\n"
         "        time.sleep(0.05)\n"
         "threading.Thread(target=keep, daemon=True).start()\ntime.sleep(0.3)\nprint('left=yes')"]


@pytest.mark.parametrize("design", DESIGNS, indirect=True)
def test_a_process_or_thread_left_running_ends_with_its_kernel(design, grader):
    try:
        first = grader.run(LEAVE)
        assert answer(first, "left") == "yes"
        time.sleep(0.5)
        survivors = [p.pid for p in psutil.process_iter(["cmdline"])
                     if p.info["cmdline"] and TOKEN in " ".join(p.info["cmdline"])]
        probe = f"\nimport os\nprint('seen=' + repr([visible(), os.path.exists('/tmp/{TOKEN}-thread')]))"
        honest = grader.run([FIND + probe])
        processes, thread_file = eval(answer(honest, "seen"))
        print(design, "left running:", survivors, "neighbour saw", len(processes), "processes, thread file",
              thread_file)
        closed = survivors == [] and processes == [] and not thread_file
        assert closed == (design == "per-child"), (survivors, processes, thread_file)
    finally:
        Path(f"/tmp/{TOKEN}-thread").unlink(missing_ok=True)


EXHAUST = [f"import numpy\ntry:\n    hog = numpy.empty({2 * MEMORY_MB} * 2**20, dtype=numpy.uint8)   # not touched\n"
           "    print('hog=allocated')\nexcept MemoryError:\n    print('hog=refused')",
           "chunks = []\nfor _ in range(4 * " + str(MEMORY_MB) + " // 64):\n    chunks.append(b'x' * 2**26)"]


@pytest.mark.parametrize("design", DESIGNS, indirect=True)
def test_memory_exhaustion_is_the_submissions_own(design, grader):
    if design == "without":   # no limit at all: only the refused allocation is tried (the host has the memory)
        first = grader.run(EXHAUST[:1])
        print(design, "2x allocation:", answer(first, "hog"))
        assert answer(first, "hog") == "allocated"
        return
    before = template_pids()
    first = grader.run(EXHAUST)
    print(design, "2x allocation:", answer(first, "hog"), "then:", first.status, first.reason)
    assert answer(first, "hog") == "refused"
    assert first.status == Status.MEMORY_LIMIT or "MemoryError" in str(first.nb.cells[1].outputs), first.status
    honest = grader.run(HONEST)
    assert honest.status == Status.GRADED and honest.kernel_start == "warm"
    assert answer(honest, "zeros") == "[0.0, 0.0]"
    assert set(before) <= set(template_pids())   # the template outlived it


# a neighbour graded beside: it says it runs (a file in its runtime folder, the one the grader sees), then waits
SIBLING = ["import os\nopen(os.environ['HOME'] + '/../run/started', 'w').close()\n"
           "import time\ntime.sleep(6)\nprint('alive=yes')"]

SNOOP = [FIND + "\nimport ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "memory = environ = attached = signalled = 0\n"
         "for pid in others():\n"
         "    try:\n        environ += len(open(f'/proc/{pid}/environ', 'rb').read()) > 0\n"
         "    except OSError:\n        pass\n"
         "    try:\n        line = next(l for l in open(f'/proc/{pid}/maps') if ' rw' in l)\n"
         "        start = int(line.split('-')[0], 16)\n"
         "        with open(f'/proc/{pid}/mem', 'rb') as mem:\n            mem.seek(start)\n"
         "            memory += len(mem.read(64)) == 64\n"
         "    except (OSError, StopIteration, ValueError):\n        pass\n"
         "    if libc.ptrace(16, pid, 0, 0) == 0:   # PTRACE_ATTACH; then wait for its stop and PTRACE_DETACH\n"
         "        attached += 1\n        libc.waitpid(pid, None, 0x40000000)\n        libc.ptrace(17, pid, 0, 0)\n"
         "print('snooped=' + repr([len(others()), environ, memory, attached]))"]


@pytest.mark.parametrize("design", DESIGNS, indirect=True)
def test_a_sibling_memory_and_environment_are_out_of_reach(design, grader):
    thread, result, scratch = grader.beside(SIBLING)
    wait_for(scratch / "run" / "started", thread, result)
    snooper = grader.run(SNOOP)
    thread.join(60)
    found, environ, memory, attached = eval(answer(snooper, "snooped"))
    print(design, "found, environ read, memory read, ptrace attached:", [found, environ, memory, attached])
    assert ([found, environ, memory, attached] == [0, 0, 0, 0]) == (design == "per-child"), (found, environ, memory,
                                                                                              attached)
    assert answer(result[0], "alive") == "yes"


KILL = [FIND + "\nimport os, signal\nkilled = 0\nfor pid in others():\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "        killed += 1\n    except OSError:\n        pass\nprint('killed=' + str(killed))"]


@pytest.mark.parametrize("design", DESIGNS, indirect=True)
def test_signals_reach_neither_the_template_nor_a_sibling(design, grader):
    """On the weak design the snooper kills the template: the next submission gets a new one and the same grade
    (a killed template costs nothing; the per-child design keeps its template)."""
    thread, result, scratch = grader.beside(SIBLING)
    wait_for(scratch / "run" / "started", thread, result)
    before = template_pids()
    killer = grader.run(KILL)
    thread.join(60)
    killed = int(answer(killer, "killed"))
    sibling_ok = bool(result) and result[0].status == Status.GRADED and "alive=yes" in text(result[0])
    template_ok = set(before) <= set(template_pids())
    print(design, "killed:", killed, "sibling graded:", sibling_ok, "template alive:", template_ok)
    assert (killed == 0 and sibling_ok and template_ok) == (design == "per-child"), (killed, sibling_ok, template_ok)
    assert template_ok == (design == "per-child"), "the weak design's template is killed here: the run below " \
        "shows a killed template costs nothing"
    honest = grader.run(HONEST)   # after the template was killed (without) or not: a new template, same grade
    assert honest.status == Status.GRADED and answer(honest, "zeros") == "[0.0, 0.0]"


def wait_for(path: Path, thread: threading.Thread, result: list, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        seen = result and (result[0].status, result[0].reason, text(result[0]))
        assert thread.is_alive() and time.monotonic() < deadline, (f"{path} never appeared", seen)
        time.sleep(0.05)


# Warm and cold alike, the grader's kernels never import debugpy (autograder/kernel/nodebugger.py): a debugger no
# graded notebook uses, whose import took 0.28 s on its own here (checked in the last two tests' kernels)
DEBUGGER = ("import sys\nprint('debugpy=' + repr([name for name in sys.modules if name.split('.')[0] == 'debugpy' "
            "and sys.modules[name] is not None]))\nprint('debugger=' + repr(getattr(get_ipython().kernel, "
            "'debugger', None)))")


def test_a_template_that_cannot_fork_means_a_cold_kernel_in_bubblewrap(monkeypatch, grader):
    """The template answers cold (it owns a thread: the test hook); the kernel then starts cold, still in the
    sandbox (uid 65534, its own PID namespace), and the report says why."""
    original = sandbox.kernel_env
    monkeypatch.setattr(sandbox, "kernel_env", lambda *a, **k: {**original(*a, **k), "PTE_WARM_TEST_RUN": TOKEN,
                                                                "PTE_WARM_TEST_THREAD": "1"})
    run = grader.run(["import os\nprint('who=' + repr([os.getuid(), os.getpid()]))"])
    assert run.status == Status.GRADED and run.kernel_start == "cold"
    assert any("cold kernel" in note and "threads" in note for note in run.notes), run.notes
    assert eval(answer(run, "who")) == [65534, 2]   # bubblewrap's PID 1 is its own init; the kernel is 2


def test_a_warm_kernel_that_never_answers_means_a_cold_kernel(monkeypatch, grader):
    """A warm start that fails any other way (here its client never connects, as when a loaded machine passes
    the start timeout) ran nothing of the student's: the kernel starts cold in bubblewrap, and a correct
    submission is graded, not reported as the grader's error."""
    from autograder.grading.run import kernel_client

    original = kernel_client.GradingClient.async_start_new_kernel_client

    async def stalled(self):
        if self.km.sandboxed:   # the warm kernel only
            raise RuntimeError("Kernel didn't respond in 60 seconds")
        return await original(self)

    monkeypatch.setattr(kernel_client.GradingClient, "async_start_new_kernel_client", stalled)
    run = grader.run(["import os\nprint('who=' + repr([os.getuid(), os.getpid()]))", DEBUGGER])
    assert run.status == Status.GRADED and run.kernel_start == "cold", (run.status, run.reason, run.notes)
    assert any("did not start" in note and "didn't respond" in note for note in run.notes), run.notes
    assert eval(answer(run, "who")) == [65534, 2]
    assert answer(run, "debugpy") == "[]" and answer(run, "debugger") == "None"   # a cold kernel: no debugger


def test_a_graded_notebook_leaves_nothing_open_in_the_grader(grader):
    """A grading worker grades its fourth notebook with the threads and files it had after its first: each
    notebook's client closes its ZMQ context, sockets and heartbeat thread once the kernel is dead. Before,
    every notebook left five threads and about seventeen descriptors behind, its sockets reconnecting to the
    dead kernel ten times a second: a worker grading 150 notebooks held 750 threads."""
    import gc

    def held() -> tuple[int, int]:
        gc.collect()   # a ForkedProcess keeps its pidfd until it is collected
        return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))

    warm = grader.run([DEBUGGER])   # the template is up from here on
    assert warm.status == Status.GRADED and warm.kernel_start == "warm", (warm.status, warm.notes)
    assert answer(warm, "debugpy") == "[]" and answer(warm, "debugger") == "None"   # a warm kernel: no debugger
    first = held()
    for _ in range(3):
        assert grader.run(["print(2)"]).status == Status.GRADED
    assert held() == first, f"(threads, descriptors) after one notebook {first}, after four {held()}"
