"""The GPU runner: every solution re-executed with CUDA available, then lesson 08's CUDA assertions.

Run it as ``make test-gpu`` or ``bash .ci/gpu-test.sh`` (the CI job on ``[self-hosted, gpu]``), which pick
the interpreter, or as ``python -m autograder.gpu_runner`` from the repository. It prints the Python, torch,
CUDA and GPU it runs with first and a summary table (lesson, cells run, skipped, passed, failed, status)
last. Exit status: 0 only when every notebook and every CUDA assertion passed, with CUDA available (or
without it on a dry run); 1 when anything failed, timed out or did not run; 2 for a bad setting.

What the GPU machine needs. Nothing is installed from the network: a Python that imports torch (a CUDA
build, torch >= 2.4), numpy and matplotlib, and ipywidgets for the lessons with widgets. This module
imports nothing beyond the standard library at the top (and ``autograder.kernel.protocol``, which is
standard library only), so it runs there. Then the best runner it finds:

- ``nbval``: pytest + nbval + ipykernel. As on CPU CI, stored outputs are compared (cells tagged
  ``nbval-ignore-output``, i.e. timings, devices and the CUDA-only cells, run but are not compared) and
  ``tests/conftest.py`` fails the run if a ``requires-cuda`` cell did not run (``PTE_EXPECT_CUDA=1``).
- ``nbclient``: nbclient + ipykernel. Every cell runs in a Jupyter kernel; it checks that none raises.
- ``exec``: nothing of Jupyter. Every code cell runs in one fresh Python process per notebook (through
  IPython when importable, plain ``exec`` otherwise); it checks that none raises.

Wheels in ``.whl/`` (pytest, nbval, nbclient, ipykernel and their dependencies) are installed offline
into a temporary folder first, when one of those modules is missing.

Settings (environment variables):

- ``PYTHON=...``: the interpreter ``.ci/gpu-test.sh`` uses (else the first of ``.venv/bin/python``,
  ``python3``, ``python`` that imports torch);
- ``GPU_TEST_RUNNER=nbval|nbclient|exec``: force a runner (default ``auto``, the best available);
- ``GPU_TEST_LESSONS=01_x,08_y``: run a subset of the lessons;
- ``GPU_TEST_SOLUTIONS=dir``: the folder holding ``<id>/<id>.ipynb`` (default ``solutions``, relative
  to the repository);
- ``GPU_TEST_ALLOW_CPU=1``: a dry run without CUDA: CUDA-only cells are skipped and counted;
- ``GPU_TEST_BUDGET_S=570``: the wall-clock budget for everything (it fits the CI job's 15-minute timeout).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from autograder.kernel import protocol  # standard library only: the tags this runner acts on

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ("nbval", "nbclient", "exec")
RUNNER_MODULES = ("pytest", "nbval", "nbclient", "ipykernel")
CELL_TIMEOUT_S = 300      # one cell, in every runner
STEP_TIMEOUT_S = 300      # one notebook, or the CUDA assertions
MIN_LEFT_S = 15           # a step starts only with this much of the budget left
RAISES = frozenset({protocol.RAISES_EXCEPTION, "nbval-raises-exception"})
CUDA_ASSERTIONS = "08 CUDA assertions (unit/test_amp.py)"
NAME_WIDTH = 40


# ---------------------------------------------------------------- settings and budget

@dataclass
class Settings:
    """What the environment variables ask for (see the module docstring)."""

    runner: str = "auto"
    lessons: list[str] = field(default_factory=list)
    solutions: Path = ROOT / "solutions"
    allow_cpu: bool = False
    budget_s: float = 570.0

    @classmethod
    def from_env(cls, env) -> Settings:
        """Read the ``GPU_TEST_*`` variables; ``ValueError`` names a bad one."""
        runner = env.get("GPU_TEST_RUNNER") or "auto"
        if runner not in ("auto", *RUNNERS):
            raise ValueError(f"GPU_TEST_RUNNER must be auto, {', '.join(RUNNERS)}; got {runner!r}")
        try:
            budget = float(env.get("GPU_TEST_BUDGET_S") or 570)
        except ValueError:
            raise ValueError(f"GPU_TEST_BUDGET_S must be a number of seconds; got {env['GPU_TEST_BUDGET_S']!r}") \
                from None
        return cls(runner=runner,
                   lessons=[w for w in env.get("GPU_TEST_LESSONS", "").split(",") if w],
                   solutions=ROOT / (env.get("GPU_TEST_SOLUTIONS") or "solutions"),
                   allow_cpu=env.get("GPU_TEST_ALLOW_CPU") == "1",
                   budget_s=budget)


class Budget:
    """The wall-clock budget of a whole run."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self.seconds, self.clock = seconds, clock
        self.start = clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def timeout(self, cap: float = STEP_TIMEOUT_S) -> float:
        """A step's time limit: what is left, at most ``cap``, at least 10 s."""
        return max(10.0, min(self.left(), cap))


@dataclass
class Run:
    """One run's context: where its files go, its budget, whether CUDA is there."""

    work: Path
    budget: Budget
    cuda: bool


# ---------------------------------------------------------------- small pieces

def have(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags") or [])


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def find_lessons(folder: Path, wanted: list[str]) -> list[tuple[str, Path]]:
    """``(id, notebook)`` for each ``NN_topic/NN_topic.ipynb`` under ``folder``, narrowed to ``wanted``."""
    found = sorted(p.name for p in folder.iterdir()
                   if p.is_dir() and p.name[:2].isdigit() and (p / f"{p.name}.ipynb").is_file())
    return [(name, folder / name / f"{name}.ipynb") for name in found if not wanted or name in wanted]


def choose_runner(forced: str = "auto", available=have) -> str:
    if forced != "auto":
        return forced
    if available("pytest", "nbval", "nbformat", "ipykernel"):
        return "nbval"
    if available("nbclient", "nbformat", "ipykernel"):
        return "nbclient"
    return "exec"


def row(name: str, run: int = 0, skipped: int = 0, passed: int = 0, failed: int = 0, status: str = "ok",
        notes=()) -> dict:
    """One line of the summary table (a plain dict: the exec runner's child sends it back as JSON)."""
    return {"lesson": name, "run": run, "skipped": skipped, "passed": passed, "failed": failed,
            "status": status, "notes": list(notes)}


def is_bad(result: dict) -> bool:
    return result["status"] != "ok" or result["failed"] > 0


def run_bounded(command: list[str], timeout: float, **kwargs) -> int | str:
    """Run ``command`` in its own process group; on timeout kill the whole group (kernels included).

    Returns the exit code, or ``"timeout"``.
    """
    process = subprocess.Popen(command, start_new_session=True, **kwargs)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return "timeout"


# ---------------------------------------------------------------- the machine

def environment() -> bool:
    """Print Python, torch, CUDA, cuDNN, each GPU and the driver; return whether CUDA is available."""
    import torch

    cuda = torch.cuda.is_available()
    print("python  ", sys.version.split()[0], sys.executable)
    print("torch   ", torch.__version__, "| CUDA (build)", torch.version.cuda,
          "| cuDNN", torch.backends.cudnn.version() if cuda else None)
    if cuda:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            print(f"GPU {i}   ", props.name, f"| {props.total_memory / 2**30:.0f} GiB",
                  f"| compute capability {props.major}.{props.minor}")
    else:
        print("GPU     ", "none: torch.cuda.is_available() is False")
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if smi.returncode == 0:
            print("driver  ", smi.stdout.strip().replace("\n", ", "))
    except (OSError, subprocess.SubprocessError):
        pass
    return cuda


def install_wheels(work: Path, wheels: Path = ROOT / ".whl") -> Path | None:
    """Install ``.whl/*.whl`` offline into ``work/site`` when a runner module is missing; the folder, or None."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found or have(*RUNNER_MODULES):
        return None
    site = work / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--target", str(site), *map(str, found)])
    if done.returncode != 0:
        print(f"wheels   could not install {len(found)} wheel(s) from {wheels} (pip exit {done.returncode})")
        return None
    print(f"wheels   {len(found)} from {wheels}, installed offline for this run")
    return site


def prepare(settings: Settings, work: Path) -> None:
    """What every process of the run sees: the course on the path, unbuffered output, CUDA expected."""
    site = install_wheels(work)
    front = [str(ROOT), str(ROOT / "tests")] + ([str(site)] if site else [])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(front + ([old] if old else []))
    if site:
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
    os.environ["PYTHONUNBUFFERED"] = "1"   # no MPLBACKEND: kernels use the inline backend the figures came from
    if not settings.allow_cpu:
        os.environ["PTE_EXPECT_CUDA"] = "1"   # tests/conftest.py: a requires-cuda cell that did not run fails


# ---------------------------------------------------------------- judging what ran

def junit_counts(path: Path) -> dict:
    """Passed, failed and skipped test cases of a pytest JUnit XML file, with a note per skip."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "notes": []}
    if not path.is_file():
        return counts
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag == "skipped":
                outcome = "skipped"
                counts["notes"].append(f"skipped {case.get('name')}: {child.get('message', '')}")
            elif child.tag in ("failure", "error"):
                outcome = "failed"
        counts[outcome] += 1
    return counts


def judge_cells(name: str, cells: list[tuple[dict, list | None]]) -> dict:
    """``cells``: ``[(cell, outputs, or None when skipped)]`` -> a table row.

    A cell fails when it has an error output and is not tagged to raise.
    """
    result = row(name)
    for index, (cell, outputs) in enumerate(cells):
        if outputs is None:
            result["skipped"] += 1
            result["notes"].append(f"skipped cell {index} (id {cell.get('id')}): requires CUDA (not available here)")
            continue
        result["run"] += 1
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors and not (tags(cell) & RAISES):
            result["failed"] += 1
            result["notes"].append(f"cell {index} (id {cell.get('id')}): {errors[0].get('ename')}: "
                                   f"{str(errors[0].get('evalue'))[:300]}")
        else:
            result["passed"] += 1
    if result["failed"]:
        result["status"] = "FAIL"
    return result


def result_line_counts(stdout: str) -> dict[str, int]:
    """The ``RESULT passed=.. failed=.. skipped=..`` line of ``python tests/unit/test_amp.py``; {} without one."""
    counts = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            counts = {key: int(value) for key, value in (part.split("=", 1) for part in line.split()[1:])}
    return counts


# ---------------------------------------------------------------- runners

def run_pytest(run: Run, name: str, args: list[str]) -> dict:
    xml = run.work / f"{name}.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-ra",
               "--junitxml", str(xml), *args]
    code = run_bounded(command, run.budget.timeout(), cwd=ROOT)
    counts = junit_counts(xml)
    status = "ok" if code == 0 else ("TIMEOUT" if code == "timeout" else f"FAIL (pytest exit {code})")
    return row(name, counts["passed"] + counts["failed"], counts["skipped"], counts["passed"], counts["failed"],
               status, counts["notes"])


def run_nbval(run: Run, name: str, path: Path) -> dict:
    return run_pytest(run, name, ["-p", "conftest", "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
                                  "tests/support/nbval_sanitize.cfg", "--nbval-cell-timeout", str(CELL_TIMEOUT_S),
                                  str(path)])


def run_nbclient(run: Run, name: str, path: Path) -> dict:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    skip = set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and protocol.REQUIRES_CUDA in tags(cell) and not run.cuda:
            skip.add(index)
            cell.source = "pass  # requires CUDA: skipped on this machine"
    client = NotebookClient(nb, timeout=int(run.budget.timeout(CELL_TIMEOUT_S)), kernel_name="python3",
                            allow_errors=True, resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except Exception as exc:  # a dead kernel or a timeout: report it, keep the other lessons going
        return row(name, status="FAIL", notes=[f"{type(exc).__name__}: {exc}"[:400]])
    cells = [(cell, None if i in skip else cell.get("outputs", []))
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    return judge_cells(name, cells)


def run_exec(run: Run, name: str, path: Path) -> dict:
    """The notebook in a fresh ``python -m autograder.gpu_runner --exec-one`` process, in its own folder."""
    out = run.work / f"{name}.json"
    command = [sys.executable, "-m", "autograder.gpu_runner", "--exec-one", str(path.resolve()), str(out),
               "1" if run.cuda else "0"]
    if run_bounded(command, run.budget.timeout(), cwd=path.parent,
                   env=dict(os.environ, MPLBACKEND="Agg")) == "timeout":
        return row(name, status="TIMEOUT")
    if not out.is_file():
        return row(name, status="FAIL", notes=["the notebook's process died before reporting"])
    return json.loads(out.read_text())


def exec_one(path: Path, out: Path, cuda: bool) -> None:
    """Run every code cell of one notebook in this process (fresh for each notebook); write its row."""
    nb = json.loads(path.read_text())
    os.chdir(path.parent)
    shell = None
    try:
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
    except ImportError:
        namespace = {"__name__": "__main__", "display": print}
    cells = []
    for index, cell in enumerate(c for c in nb["cells"] if c.get("cell_type") == "code"):
        if protocol.REQUIRES_CUDA in tags(cell) and not cuda:
            cells.append((cell, None))
            continue
        error = None
        if shell is not None:
            result = shell.run_cell(source(cell), store_history=True)
            error = result.error_before_exec or result.error_in_exec
        else:
            try:
                exec(compile(source(cell), f"<cell {index}>", "exec"), namespace)
            except BaseException as exc:  # the cell's error is what we report
                error = exc
        outputs = [] if error is None else [{"output_type": "error", "ename": type(error).__name__,
                                             "evalue": str(error)}]
        cells.append((cell, outputs))
    out.write_text(json.dumps(judge_cells(path.stem, cells)))


def run_cuda_assertions(run: Run) -> dict | None:
    """Lesson 08's ``test_cuda_*`` (tests/unit/test_amp.py): with pytest, else as a script."""
    if not (ROOT / "tests" / "unit" / "test_amp.py").is_file():
        return None
    if have("pytest"):
        result = run_pytest(run, "cuda-assertions", ["--noconftest", "tests/unit/test_amp.py", "-k", "test_cuda_"])
        result["lesson"] = CUDA_ASSERTIONS
        return result
    try:
        done = subprocess.run([sys.executable, "tests/unit/test_amp.py"], capture_output=True, text=True, cwd=ROOT,
                              timeout=run.budget.timeout())
    except subprocess.TimeoutExpired:
        return row(CUDA_ASSERTIONS, status="TIMEOUT")
    print(done.stdout, done.stderr, sep="")
    counts = result_line_counts(done.stdout)
    passed, failed, skipped = (counts.get(k, 0) for k in ("passed", "failed", "skipped"))
    status = "ok" if done.returncode == 0 and counts else f"FAIL (exit {done.returncode})"
    return row(CUDA_ASSERTIONS, passed + failed, skipped, passed, failed, status)


RUN = {"nbval": run_nbval, "nbclient": run_nbclient, "exec": run_exec}


# ---------------------------------------------------------------- the whole run

def run_lessons(run: Run, runner: str, lessons: list[tuple[str, Path]]) -> list[dict]:
    """Each lesson with ``runner`` while the budget lasts, then the CUDA assertions; one row each."""
    rows = []
    for name, path in lessons:
        if run.budget.left() < MIN_LEFT_S:
            rows.append(row(name, status="NOT RUN (time budget)"))
            continue
        print(f"\n== {name} ({runner}) ==", flush=True)
        began = time.monotonic()
        result = RUN[runner](run, name, path)
        result["seconds"] = time.monotonic() - began
        for note in result["notes"]:
            print("  ", note)
        rows.append(result)
    if run.budget.left() < MIN_LEFT_S:
        rows.append(row(CUDA_ASSERTIONS, status="NOT RUN (time budget)"))
        return rows
    print("\n== lesson 08: CUDA assertions ==", flush=True)
    result = run_cuda_assertions(run)
    if result is not None:
        rows.append(result)
    return rows


def summary(rows: list[dict], runner: str, seconds: float) -> list[str]:
    """The summary table's lines, its total last."""
    total = row("total", *(sum(r[k] for r in rows) for k in ("run", "skipped", "passed", "failed")))
    bad = [r for r in rows if is_bad(r)]
    total["status"] = "ok" if not bad else f"FAIL ({len(bad)})"
    header = f"{'lesson':{NAME_WIDTH}} {'cells run':>9} {'skipped':>7} {'passed':>6} {'failed':>6}  status"
    lines = [f"== GPU test summary: runner {runner}, {seconds:.0f} s ==", header, "-" * len(header)]
    for r in rows + [total]:
        if r is total:
            lines.append("-" * len(header))
        lines.append(f"{r['lesson']:{NAME_WIDTH}} {r['run']:>9} {r['skipped']:>7} {r['passed']:>6} "
                     f"{r['failed']:>6}  {r['status']}")
    return lines


def run_all(settings: Settings, work: Path, budget: Budget) -> int:
    print("== GPU test: environment ==")
    cuda = environment()
    prepare(settings, work)
    runner = choose_runner(settings.runner)
    print("runner  ", runner, "| budget", f"{settings.budget_s:.0f} s", "| CUDA-only cells",
          "run" if cuda else "skipped (GPU_TEST_ALLOW_CPU=1)" if settings.allow_cpu else "-")
    if not cuda and not settings.allow_cpu:
        print("\ngpu-test: CUDA is not available, so nothing that needs it can be checked. This runner is for "
              "a CUDA machine (set GPU_TEST_ALLOW_CPU=1 for a dry run without one).")
        rows = [row("(no CUDA)", status="FAIL", notes=["torch.cuda.is_available() is False"])]
    else:
        rows = run_lessons(Run(work, budget, cuda), runner, find_lessons(settings.solutions, settings.lessons))
    print("\n" + "\n".join(summary(rows, runner, budget.elapsed())))
    return 1 if any(is_bad(r) for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--exec-one"] and len(argv) == 4:
        exec_one(Path(argv[1]), Path(argv[2]), argv[3] == "1")
        return 0
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv:
        print("usage: python -m autograder.gpu_runner   (settings: GPU_TEST_* environment variables, see --help)",
              file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env(os.environ)
    except ValueError as exc:
        print(f"gpu-test: {exc}", file=sys.stderr)
        return 2
    budget = Budget(settings.budget_s)
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="gpu-test.") as work:
        return run_all(settings, Path(work), budget)

if __name__ == "__main__":
    sys.exit(main())
