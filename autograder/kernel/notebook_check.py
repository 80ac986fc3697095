"""Two helpers a lesson uses from inside its kernel: the closing self-check and progress bars.

``self_check(lesson)`` is the last cell of every lesson. It runs the *visible* part of each
graded test cell again, in this kernel, against the code as it is now, and prints one row per
exercise: its points and "passed" or the first line of the first failing message. It reads the
test cells from the lesson's notebook on disk (they are locked, so the saved file holds exactly
what the grader runs) and cuts off any hidden part, like ``make check``
(:mod:`autograder.kernel.selfcheck`), whose helpers it reuses. The checks run in the notebook's
namespace, as the test cells do, with the random number generators and torch's global switches
saved and restored, so the cells below draw the same numbers. It never raises: an error in it
would stop Run All.

``progress(iterable, total=None, desc="")`` iterates like ``iterable`` and, in a Jupyter kernel
with ipywidgets, shows a widget progress bar below the cell. It prints nothing and displays
only the widget view (no text repr), so nbval has nothing to compare and stored outputs stay
deterministic; outside a kernel (a plain script) it is a no-op wrapper.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
import time
from pathlib import Path
from typing import Iterable, Iterator

from autograder.kernel import selfcheck
from autograder.kernel.vocabulary import protocol

__all__ = ["self_check", "run_visible_checks", "format_results", "find_notebook", "progress"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MESSAGE_WIDTH = 100   # characters of a failing message shown in the table


# ---------------------------------------------------------------- self-check

def find_notebook(lesson: str) -> Path | None:
    """The lesson's notebook as this kernel sees it, or ``None``.

    JupyterLab tells the kernel its notebook (``$JPY_SESSION_NAME``); nbclient, nbval, nbgrader
    and the grader start the kernel in the notebook's folder, where ``<lesson>.ipynb`` lives.
    """
    candidates = []
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session.endswith(".ipynb"):
        candidates.append(Path(session))
    candidates.append(Path.cwd() / f"{lesson}.ipynb")
    for path in candidates:
        if path.is_file() and _test_cells(path):
            return path
    return None


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _test_cells(path: Path) -> list[dict]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [cell for cell in nb.get("cells", []) if protocol.is_test_cell(cell)]


def _user_namespace() -> dict:
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    shell = get_ipython()
    return shell.user_ns if shell is not None else {}


@contextlib.contextmanager
def _preserved_state():
    """Random generators and torch's global switches as they were before the checks ran."""
    saved_random = random.getstate()
    try:
        import numpy as np

        saved_numpy = np.random.get_state()
    except ImportError:  # numpy is always there in the course; the helper does not insist
        np, saved_numpy = None, None
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None:
        try:
            yield
        finally:
            random.setstate(saved_random)
        return
    switches = {
        "grad": torch.is_grad_enabled(),
        "dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
    }
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(saved_random)
        if np is not None:
            np.random.set_state(saved_numpy)
        torch.set_grad_enabled(switches["grad"])
        torch.set_default_dtype(switches["dtype"])
        if torch.get_num_threads() != switches["threads"]:
            torch.set_num_threads(switches["threads"])
        # only when a check changed it: the first call of use_deterministic_algorithms takes seconds
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) != (
                switches["deterministic"], switches["deterministic_warn_only"]):
            torch.use_deterministic_algorithms(switches["deterministic"],
                                               warn_only=switches["deterministic_warn_only"])
        torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
        torch.backends.cudnn.deterministic = switches["cudnn_deterministic"]


def _explain(exc: BaseException) -> str:
    """The message a student needs, from what the visible checks raised."""
    if type(exc).__name__ == "CheckFailed":
        return str(exc).strip() or "a check failed"
    if isinstance(exc, NotImplementedError):
        return "not implemented yet: replace the `raise NotImplementedError()` line with your code"
    if isinstance(exc, NameError):
        return (f"{exc}: run the cells above first (this exercise's answer cell, and the setup and demo "
                "cells it uses)")
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def run_visible_checks(lesson: str, namespace: dict | None = None,
                       notebook: Path | None = None) -> list[dict]:
    """Run the visible part of every test cell of ``lesson``; one result per exercise, in order.

    Each result: ``exercise``, ``grade_id``, ``points``, ``passed``, ``message`` (``None`` when
    passed), ``seconds``. ``namespace`` defaults to the kernel's user namespace;
    ``notebook`` to :func:`find_notebook`. Raises ``FileNotFoundError`` without a notebook.
    """
    path = notebook or find_notebook(lesson)
    if path is None:
        raise FileNotFoundError(
            f"cannot find {lesson}.ipynb with its test cells next to this kernel ({Path.cwd()}): "
            f"keep the notebook's name and folder, save it, and run this cell again")
    # The notebook's own namespace, as when the test cells run: some checks swap a notebook function for a
    # spy in it (the student's code looks its helpers up there), so a copy would not do.
    base = namespace if namespace is not None else _user_namespace()
    results = []
    for cell in _test_cells(path):
        meta = protocol.nbgrader_meta(cell)
        grade_id = str(meta.get("grade_id", ""))
        code = selfcheck.visible_part(_source(cell))
        started = time.monotonic()
        message = None
        with _preserved_state(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            try:
                exec(compile(code, f"<visible checks of {grade_id}>", "exec"), base)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # whatever the student's code raised is the finding we report
                message = _explain(exc)
        results.append({"exercise": protocol.exercise_of(grade_id), "grade_id": grade_id,
                        "points": meta.get("points", 0), "passed": message is None, "message": message,
                        "seconds": round(time.monotonic() - started, 2)})
    return results


def _shorten(text: str, width: int = MESSAGE_WIDTH) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 3] + "..."


def format_results(lesson: str, results: list[dict]) -> str:
    """The table ``self_check`` prints: exercise, points, passed or the first failing line."""
    rows = [("exercise", "points", "visible checks")]
    rows += [(r["exercise"], str(r["points"]), "passed" if r["passed"] else "FAILED: " + _shorten(r["message"]))
             for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"Visible checks of {lesson}, run again now on your current code:", ""]
    for i, (exercise, points, outcome) in enumerate(rows):
        lines.append(f"{exercise:<{widths[0]}}  {points:>{widths[1]}}  {outcome}")
        if i == 0:
            lines.append(f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 14}")
    passed = [r for r in results if r["passed"]]
    lines += ["", f"Passed the visible checks of {len(passed)} of {len(results)} exercises "
                  f"({sum(r['points'] for r in passed)} of {sum(r['points'] for r in results)} points' worth).",
              selfcheck.NOTE]
    details = [r for r in results if not r["passed"] and "\n" in r["message"].strip()]
    if details:
        lines += ["", "Details of the failing checks:"]
        for r in details:
            lines.append(f"{r['exercise']}:")
            lines += ["    " + line for line in r["message"].strip().splitlines()]
    return "\n".join(lines)


def self_check(lesson: str) -> None:
    """Print the visible checks' results for ``lesson`` (the last cell of every lesson). Never raises."""
    try:
        results = run_visible_checks(lesson)
    except FileNotFoundError as exc:
        print(f"Self-check: {exc}")
        return
    except KeyboardInterrupt:
        print("Self-check interrupted.")
        return
    except Exception as exc:  # a self-check must never stop Run All
        print(f"Self-check could not run: {type(exc).__name__}: {exc}")
        return
    if not results:
        print(f"Self-check: {lesson} has no graded test cells.")
        return
    print(format_results(lesson, results))


# ---------------------------------------------------------------- progress bars

def _in_widget_kernel() -> bool:
    """A Jupyter kernel (not a plain script or terminal IPython) with ipywidgets installed."""
    if os.environ.get("PTE_PROGRESS", "1") == "0":
        return False
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class _Bar:
    """An IntProgress with a counter, displayed as a widget view only (no text repr for nbval)."""

    def __init__(self, total: int | None, desc: str):
        import ipywidgets as widgets
        from IPython.display import display

        self.total = total
        self.unit = f" {desc}" if desc else ""
        # "initial": the whole description shows ("learning rates", not "learning r...")
        self.bar = widgets.IntProgress(value=0, min=0, max=max(total or 1, 1), description=desc,
                                       bar_style="info", style={"description_width": "initial"})
        self.label = widgets.Label(self._count(0))
        self.box = widgets.HBox([self.bar, self.label])
        # what ipywidgets' own display sends, minus the text/plain repr
        display({WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": self.box.model_id}}, raw=True)
        self.shown = 0
        self.last = time.monotonic()

    def _count(self, done: int) -> str:
        return f"{done}/{self.total}" if self.total is not None else f"{done}"

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 0.1 and done != self.total:
            return   # at most ten updates a second: widget traffic counts against the grader's output cap
        self.last, self.shown = now, done
        if self.total is not None:
            self.bar.value = min(done, self.bar.max)
        self.label.value = self._count(done)

    def finish(self, done: int, style: str, note: str = "") -> None:
        self.update(done, force=True)
        self.bar.bar_style = style
        if note:
            self.label.value = f"{self._count(done)}{self.unit} ({note})"


def progress(iterable: Iterable, total: int | None = None, desc: str = "") -> Iterator:
    """Yield from ``iterable``; in JupyterLab a progress bar below the cell shows how far it got.

    ``total`` defaults to ``len(iterable)`` where it has one; ``desc`` labels the bar (e.g.
    ``"epochs"``). Outside a Jupyter kernel with ipywidgets (or with ``PTE_PROGRESS=0``) it
    shows nothing. It never prints, so a cell's text output stays the same with or without it.
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    bar = _Bar(total, desc) if _in_widget_kernel() else None
    if bar is None:
        yield from iterable
        return
    done = 0
    try:
        for item in iterable:
            yield item
            done += 1
            bar.update(done)
    except GeneratorExit:
        bar.finish(done, "warning", "stopped early")
        raise
    except BaseException:
        bar.finish(done, "danger", "stopped by an error")
        raise
    bar.finish(done, "success")
