"""The grading command against a synthetic class: honest students, attacks, crashes, bad files.

Lesson 01 has five 2-point exercises. Each synthetic student starts from the correct
answers and changes one thing (``tampered-four-ways``: one in each of four test cells, each
found and costing its own exercise); the table says which status and per-exercise scores the
change must produce. Honest students' grades must not move whatever the others do. One
regrade, killed midway and run again, proves a rerun, its repeatability and the manual
grades it keeps. The battery graded once is the file's cost (issue 47): a case another
proves is not added (output floods: test_flood.py too; spinning children: the fork bomb).
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder import course
from autograder.grading.isolate import sandbox
from autograder.kernel.vocabulary import protocol

import coursekit as kit

LESSON = "01_tensors_and_views"
EXERCISES = ["shares_storage", "flatten_features", "independent_copy", "to_class_labels", "linear_forward"]
FULL = {name: 2.0 for name in EXERCISES}

WRONG_FLATTEN = "def flatten_features(x):\n    return x.view(x.shape[0], -1)\n"
WRONG_LINEAR = "def linear_forward(x, weight, bias):\n    return x @ weight + bias\n"
WRONG_LABELS = "def to_class_labels(arr):\n    return torch.from_numpy(arr)\n"
WRONG_SHARES = "def shares_storage(a, b):\n    return a.data_ptr() == b.data_ptr()\n"
# passes every visible check and fails only a hidden one (test_pitfalls proves both for the whole table)
HIDDEN_ONLY_COPY = next(iter(kit.load_pitfall_module(LESSON).HIDDEN_ONLY["independent_copy"].values()))
ZERO = {n: 0.0 for n in EXERCISES}

# Every trick below is something a student who read autograder/ could try. Each one makes the
# visible checks pass in the student's own kernel; none of them may earn an unsolved exercise.
NOOP_HELPERS = (
    "def _x(_=exec(\"import autograder.kernel.checks, autograder.kernel.hidden\\n"
    "class _Quiet:\\n    def __getattr__(self, name):\\n        return lambda *a, **k: None\\n"
    "for c in (autograder.kernel.checks, autograder.kernel.hidden):\\n"
    "    for n in list(vars(c)):\\n        if not n.startswith('_') and callable(getattr(c, n)):\\n"
    "            setattr(c, n, lambda *a, **k: _Quiet())\")):\n    pass\n")
TENSOR_SUB = "import torch\ntorch.Tensor.__sub__ = lambda self, other: torch.zeros_like(self)\n"
REPLACE_CODE = ("from autograder.kernel import checks as _c, hidden as _h\n"
                "for _f in (_c.check_tensor, _c.expect, _c.check_type, _c.call, _h.HiddenTests.__init__):\n"
                "    _f.__code__ = (lambda *a, **k: None).__code__\n")
SHELL_CLASS_PATCH = (
    "from IPython.core.interactiveshell import InteractiveShell\n"
    "_original = InteractiveShell.run_cell\n"
    "def _skip_tests(self, raw_cell, *args, **kwargs):\n"
    "    if 'checks.' in raw_cell and '\"\"\"' in raw_cell:\n"
    "        raw_cell = 'pass'\n"
    "    return _original(self, raw_cell, *args, **kwargs)\n"
    "InteractiveShell.run_cell = _skip_tests\n")
GETFRAME_WANT = (
    "import sys\n"
    "def linear_forward(x, weight, bias):\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        if 'want' in frame.f_locals or 'want' in frame.f_globals:\n"
    "            return (frame.f_locals.get('want') if 'want' in frame.f_locals else frame.f_globals['want'])\n"
    "        frame = frame.f_back\n"
    "    return x @ weight + bias\n")
DISPLAYHOOK = ("def shares_storage(a, b):\n"
               "    get_ipython().displayhook(1000.0)\n"
               "    return False\n")
LEGITIMATE_STYLES = {
    "shares_storage": ("import math\nSCALE = 1 / math.sqrt(2)\nH, W = 8, 8\n"
                       "storage_of = lambda t: (t.untyped_storage().data_ptr(),\n"
                       "                        t.untyped_storage().data_ptr() + t.untyped_storage().nbytes())\n"
                       "def shares_storage(a, b):\n    (a0, a1), (b0, b1) = storage_of(a), storage_of(b)\n"
                       "    return max(a0, b0) < min(a1, b1)\n"),
    "flatten_features": ("try:\n    from math import prod\nexcept ImportError:\n    prod = None\n"
                         "CALLS = 0\nCALLS += 1\n"
                         "def flatten_features(x):\n    rest = [d for d in x.shape[1:]]\n"
                         "    n, k = x.shape[0], prod(rest)\n"
                         "    kept = [(s, st) for s, st in zip(x.shape[1:], x.stride()[1:]) if s != 1]\n"
                         "    if all(o == s * i for (_, o), (s, i) in zip(kept, kept[1:])):\n"
                         "        return x.as_strided((n, k), (x.stride(0), kept[-1][1] if kept else 1)"
                         ", x.storage_offset())\n"
                         "    return x.contiguous().as_strided((n, k), (k, 1))\n"),
    "independent_copy": ("class Copier:\n    count = 0\n    for _ in range(2):\n        count += 1\n"
                         "    def __call__(self, tensors):\n"
                         "        if isinstance(tensors, torch.Tensor):\n            return self({0: tensors})[0]\n"
                         "        spans, made, out = {}, {}, {}\n"
                         "        for t in filter(torch.Tensor.numel, tensors.values()):\n"
                         "            a = t.storage_offset()\n"
                         "            b = a + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1\n"
                         "            lo, hi = spans.setdefault(t.untyped_storage().data_ptr(), (a, b))\n"
                         "            spans[t.untyped_storage().data_ptr()] = (min(lo, a), max(hi, b))\n"
                         "        for name, t in tensors.items():\n"
                         "            if not t.numel():\n                out[name] = t.detach().clone()\n"
                         "                continue\n"
                         "            key = t.untyped_storage().data_ptr()\n"
                         "            lo, hi = spans[key]\n"
                         "            if key not in made:\n"
                         "                made[key] = t.detach().as_strided((hi - lo,), (1,), lo).clone()\n"
                         "            out[name] = made[key].as_strided(t.shape, t.stride(), t.storage_offset() - lo)\n"
                         "        return out\n"
                         "independent_copy = Copier()\n"),
    "linear_forward": ("def linear_forward(x, weight, bias):\n    if x.shape[-1] != weight.shape[1]:\n"
                       "        raise ValueError(f'x: {x.shape[-1]} features, weight: {weight.shape[1]}')\n"
                       "    if bias is not None and tuple(bias.shape) != (weight.shape[0],):\n"
                       "        raise ValueError(f'bias {tuple(bias.shape)} for {weight.shape[0]} outputs')\n"
                       "    out = (x.unsqueeze(-2) * weight_t(weight).mT).sum(-1)\n"
                       "    return out if bias is None else out + bias\n"),
}
FORK_BOMB = ("def linear_forward(x, weight, bias):\n    import os\n    while True:\n        try:\n"
             "            os.fork()\n        except OSError:\n            pass\n")


def answers(**overrides):
    return overrides


# student -> (answer overrides (None: the untouched release; a dict under the key "release" starts from
# the release instead of the solution), notebook surgery or None, expected status, expected scores)
CASES = {
    "honest-solution": (answers(), None, "graded", FULL),
    "honest-untouched": (None, None, "graded", ZERO),
    "hidden-only-wrong": (answers(independent_copy=HIDDEN_ONLY_COPY), None, "graded",
                          dict(FULL, independent_copy=0.0)),
    "legitimate-styles": (answers(**LEGITIMATE_STYLES), "legit", "graded", FULL),
    "trick-noop-helpers-from-default-arg": ({"release": {"shares_storage": NOOP_HELPERS}}, None, "graded", ZERO),
    "trick-patch-tensor-sub": ({"release": {"shares_storage": TENSOR_SUB}}, None, "graded", ZERO),
    "trick-replace-helper-code": ({"release": {"shares_storage": REPLACE_CODE}}, None, "graded", ZERO),
    "trick-interactiveshell-class-patch": ({"release": {"shares_storage": SHELL_CLASS_PATCH}}, None, "graded", ZERO),
    "trick-getframe-want": (answers(linear_forward=GETFRAME_WANT), None, "graded", dict(FULL, linear_forward=0.0)),
    "trick-displayhook-partial-credit": (answers(shares_storage=DISPLAYHOOK), None, "graded",
                                         dict(FULL, shares_storage=0.0)),
    "patch-torch-top-level": (answers(flatten_features=(
        "import torch\n"
        "torch.equal = lambda *a, **k: True\n"
        "torch.allclose = lambda *a, **k: True\n"
        "torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)\n"
        "checks.check_tensor = lambda *a, **k: None\n" + WRONG_FLATTEN)),
        None, "graded", dict(FULL, flatten_features=0.0)),
    "silence-tracebacks": (answers(shares_storage=(
        "def shares_storage(a, b):\n"
        "    import sys\n"
        "    ip = get_ipython()\n"
        "    ip.showtraceback = lambda *a, **k: None\n"
        "    sys.excepthook = lambda *a: None\n"
        "    return a.data_ptr() == b.data_ptr()\n"), to_class_labels=WRONG_LABELS),
        None, "graded", dict(FULL, shares_storage=0.0, to_class_labels=0.0)),
    "blank-later-cells": (answers(shares_storage=(
        "def shares_storage(a, b):\n"
        "    ip = get_ipython()\n"
        "    if not getattr(ip, '_blanked', False):\n"
        "        ip._blanked = True\n"
        "        ip.input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
        "    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()\n")),
        # the demo after the answer calls shares_storage, so every later cell is blanked: no test observes anything
        None, "graded", ZERO),
    # four tamperings, one per test cell (each cell is canonicalised on its own: each is found, each costs its
    # exercise, none moves another's): a student apiece until issue 47
    "tampered-four-ways": (answers(flatten_features=WRONG_FLATTEN, linear_forward=WRONG_LINEAR,
                                   to_class_labels=WRONG_LABELS),
                           "delete:test_shares_storage edit:test_flatten_features duplicate:test_linear_forward "
                           "rename:test_to_class_labels", "tampered",
                           dict(FULL, shares_storage=0.0, flatten_features=0.0, linear_forward=0.0,
                                to_class_labels=0.0)),
    "infinite-loop": (answers(linear_forward="def linear_forward(x, weight, bias):\n    while True:\n        pass\n"),
                      None, "timeout", dict(FULL, linear_forward=0.0)),
    "ignores-sigint": (answers(linear_forward=(
        "def linear_forward(x, weight, bias):\n    import signal\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n    while True:\n        pass\n")),
        None, "timeout", dict(FULL, linear_forward=0.0)),
    "fork-bomb": (answers(linear_forward=FORK_BOMB), None, None, dict(FULL, linear_forward=0.0)),
    "os-exit": (answers(linear_forward="def linear_forward(x, weight, bias):\n    import os\n    os._exit(1)\n"),
                None, "kernel-died", dict(FULL, linear_forward=0.0)),
    "memory-hog": (answers(linear_forward=(
        "def linear_forward(x, weight, bias):\n    hog = []\n"
        "    while True:\n        hog.append(bytearray(50 * 2**20))\n")),
        None, "memory-limit", dict(FULL, linear_forward=0.0)),
    "long-debug-print": (answers(shares_storage=(
        "def shares_storage(a, b):\n    for i in range(2000):\n        print('debug line', i, 'x' * 80)\n"
        "    sa, sb = a.untyped_storage(), b.untyped_storage()\n"
        "    return max(sa.data_ptr(), sb.data_ptr())"
        " < min(sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes())\n")),
        None, "graded", FULL),
    "output-flood": (answers(linear_forward=(
        "def linear_forward(x, weight, bias):\n    while True:\n        print('x' * 10000)\n")),
        None, "output-limit", dict(FULL, linear_forward=0.0)),
    "corrupt-json": (answers(), "corrupt", "corrupt", ZERO),
    "renamed-notebook": (answers(), "rename-file", "missing", ZERO),
    "empty-folder": (answers(), "empty", "missing", ZERO),
}
# the fork bomb ends either at the memory cap (its copies count) or at the time limits. Its copies spin beside the
# kernel as a CPU hog's children would: a CPU hog of its own (4 spinning processes) proved nothing more (issue 47)
FORK_BOMB_STATUSES = {"memory-limit", "timeout"}


def spy_answer(course_root: Path, port: int) -> str:
    """shares_storage that is right only if it can read the gradebook, another student's work, or the network."""
    return (
        "def shares_storage(a, b):\n"
        "    import socket\n"
        "    leaks = 0\n"
        f"    for path in [{str(course_root / 'gradebook.db')!r}, {str(course_root / 'solutions')!r},\n"
        f"                 {str(course_root / 'submitted' / 'honest-solution')!r}]:\n"
        "        try:\n"
        "            open(path, 'rb').close() if not path.endswith(('solutions', 'honest-solution'))"
        " else __import__('os').listdir(path)\n"
        "            leaks += 1\n"
        "        except OSError:\n"
        "            pass\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "        leaks += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "    if leaks:\n"
        "        sa, sb = a.untyped_storage(), b.untyped_storage()\n"
        "        return max(sa.data_ptr(), sb.data_ptr())"
        " < min(sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes())\n"
        "    return False\n"
    )


def build_submission(release_nb, solution_nb, overrides, surgery):
    if overrides is None:
        nb = nbformat.from_dict(release_nb)
    elif "release" in overrides:
        nb = nbformat.from_dict(release_nb)
        for name, entry in kit.exercises(nb).items():
            if name in overrides["release"]:
                entry["solution"].source = overrides["release"][name]
    else:
        nb = kit.fill_answers(release_nb, solution_nb, overrides)
    if surgery == "legit":
        # a helper in a cell the student added, the Setup cell edited, and an answer rewritten in a new
        # cell after the student deleted the stub's cell
        setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells[setup].source += "\nimport math  # added by the student"
        helper = nbformat.v4.new_code_cell(
            "def weight_t(weight):\n    return weight.T\nHELPER_CONSTANT = [i for i in range(3)]")
        helper["id"] = "student-helper"
        nb.cells.insert(setup + 1, helper)
        index = next(i for i, c in enumerate(nb.cells) if kit.nbgrader_meta(c).get("grade_id") == "ex_to_class_labels")
        rewritten = nbformat.v4.new_code_cell(
            "def to_class_labels(arr):\n    if arr.ndim == 2:\n"
            "        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)\n"
            "    bad = [v for v in arr.tolist() if not (v >= 0 and v % 1 == 0)] if arr.ndim == 1 else [arr.shape]\n"
            "    if bad:\n        raise ValueError(f'bad labels: {bad}')\n"
            "    return torch.tensor(arr, dtype=torch.long)")
        rewritten["id"] = "student-rewrite"
        nb.cells[index] = rewritten
    for step in (surgery or "").split():
        if ":" not in step:
            continue
        action, grade_id = step.split(":", 1)
        index = next(i for i, c in enumerate(nb.cells) if kit.nbgrader_meta(c).get("grade_id") == grade_id)
        cell = nb.cells[index]
        if action == "delete":
            del nb.cells[index]
        elif action == "edit":
            cell.source = '"""edited"""\npass\n'
        elif action == "duplicate":
            fake = nbformat.from_dict(cell)
            fake.source = "pass\n"
            fake["id"] = "fake-copy"
            nb.cells.insert(index, fake)
        elif action == "rename":
            cell.metadata.nbgrader["grade_id"] = grade_id + "_renamed"
            cell.source = "pass\n"
    return nb


# the battery's kernels work under here (PTE_SCRATCH), so that its survivors can be told from the kernels of
# another grading run on the same host
BATTERY_SCRATCH = Path(tempfile.gettempdir()) / f"pte-battery-{os.getpid()}"


# Lesson 01's slowest honest cell takes well under a second on an idle machine (0.16 s); 5 s leaves room for a
# loaded `make test`, and a timeout beside other submissions is confirmed alone anyway. Each submission that times
# out (the loops, the memory hog, the fork bomb) holds a core for this long twice, beside the others and alone: at
# 10 s (until issue 47) four of them held a core for about 80 s of the suite. Not shorter: on a 2-core machine at a
# load of 26, long-debug-print's honest cell ran past 5 s even alone.
CELL_TIMEOUT_S = 5


def run_grade(root: Path, *extra: str, timeout: int = 900) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2", "--timeout-s", "120",
           "--cell-timeout-s", str(CELL_TIMEOUT_S), "--memory-mb", "1500", "--output-mb", "1", *extra]
    BATTERY_SCRATCH.mkdir(exist_ok=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PTE_SCRATCH=str(BATTERY_SCRATCH)))


@pytest.fixture(scope="module", autouse=True)
def _battery_scratch():
    yield
    shutil.rmtree(BATTERY_SCRATCH, ignore_errors=True)


def battery_survivors() -> list[int]:
    """Processes of the sandbox user that one of the battery's kernels started and that are still alive (a
    kernel's HOME, inherited by all it starts, is its work folder under BATTERY_SCRATCH)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["uids"]):
        if not (proc.info["uids"] and proc.info["uids"].real == sandbox.NOBODY):
            continue
        try:
            if str(BATTERY_SCRATCH) in proc.environ().get("HOME", "") + " ".join(proc.cmdline()):
                found.append(proc.pid)
        except psutil.Error:   # gone meanwhile
            pass
    return found


@pytest.fixture(scope="module")
def listener():
    """A TCP server on loopback that a sandboxed submission must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    hits = []

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            hits.append(1)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], hits
    server.close()


def ensure_bubblewrap() -> bool:
    """Does bubblewrap work here? Tests install nothing: `make test` runs tools/system-deps.sh first."""
    sandbox.sandbox_available.cache_clear()
    return sandbox.sandbox_available()


SECRET_CODE, SECRET_VALUE = "SECRET-CODE-MARKER-5521", "SECRET-VALUE-MARKER-8812"


def plant_markers(root: Path) -> None:
    """A hidden test whose code and expected value carry marker strings; feedback must show neither."""
    path = root / "solutions" / LESSON / f"{LESSON}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = kit.exercises(nb)["to_class_labels"]["test"]
    marker = (f"# {SECRET_CODE}\n"
              f"hidden.observe('marker', {SECRET_VALUE!r} + "
              "str(checks.call(to_class_labels, np.array([1.0])).dtype))\n")
    assert "hidden.done()" in cell.source
    cell.source = cell.source.replace("hidden.done()", marker + "hidden.done()")
    nbformat.write(nb, path)
    course.execute_in_place(path)   # the reference observations now hold the marker value
    subprocess.run(course.nbgrader_cmd("generate_assignment", LESSON, "--force", "--log-level=ERROR"),
                   cwd=root, check=True)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, listener):
    port, _ = listener
    assert ensure_bubblewrap(), "bubblewrap must work here: the grading command refuses to grade without it"
    root = kit.make_scratch_course(tmp_path_factory.mktemp("class"), [LESSON])
    plant_markers(root)
    release_nb = kit.release_notebook(root, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    cases = dict(CASES)
    cases["spy"] = (answers(shares_storage=spy_answer(root, port)), None, "graded", dict(FULL, shares_storage=0.0))
    for student, (overrides, surgery, _, _) in cases.items():
        folder = root / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        if surgery == "empty":
            continue
        if surgery == "corrupt":
            (folder / f"{LESSON}.ipynb").write_text('{"cells": [ {"cell_type": "code", ')
            continue
        nb = build_submission(release_nb, solution_nb, overrides, surgery)
        name = "my_work.ipynb" if surgery == "rename-file" else f"{LESSON}.ipynb"
        nbformat.write(nb, folder / name)
    proc = run_grade(root, "--jobs", "3")
    report = json.loads((root / "grading-report.json").read_text())
    return root, cases, proc, report


def scores_by_exercise(root: Path) -> dict[str, dict[str, float]]:
    return kit.scores(root, LESSON)


def test_exit_code_and_summary(graded_class):
    root, _, proc, _ = graded_class
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "need attention" in proc.stderr


def test_timeouts_are_confirmed_alone(graded_class):
    """A timeout beside other submissions may be a neighbour's doing (a CPU hog on the same core): the
    grader runs that submission again with nothing else running, and only a second timeout stands."""
    _, _, proc, report = graded_class
    timed_out = [s for s in report["submissions"] if s["status"] == "timeout"]
    assert {s["student"] for s in timed_out} >= {"infinite-loop", "ignores-sigint"}, proc.stderr
    for submission in timed_out:
        assert "timed out again when graded alone" in submission["notes"], submission
    assert "grading it again alone" in proc.stderr


def test_a_kernel_that_ignores_the_interrupt_is_stopped(graded_class):
    """A kernel that ignores SIGINT after a cell's timeout would make every later cell wait out a timeout of
    its own until the notebook's clock ran out (120 s here, twice with the run alone); it is stopped
    instead, and an interrupted kernel that answers runs on."""
    _, _, proc, report = graded_class
    reasons = {s["student"]: s["reason"] for s in report["submissions"]}
    assert "ignored the interrupt" in reasons["ignores-sigint"], reasons["ignores-sigint"]
    assert "ignored the interrupt" not in reasons["infinite-loop"], reasons["infinite-loop"]


def test_every_submission_gets_its_status(graded_class):
    root, cases, proc, report = graded_class
    statuses = {s["student"]: (s["status"], s["reason"]) for s in report["submissions"]}
    assert set(statuses) == set(cases), proc.stderr
    wrong = {student: statuses[student] for student, case in cases.items()
             if statuses[student][0] != case[2]
             and not (case[2] is None and statuses[student][0] in FORK_BOMB_STATUSES)}
    assert not wrong, f"unexpected statuses: {wrong}\n{proc.stderr}"
    for student, (status, reason) in statuses.items():
        assert status in ("graded", "timeout", "kernel-died", "memory-limit", "output-limit", "corrupt", "missing",
                          "refused", "tampered", "error")
        if status != "graded":
            assert reason, f"{student}: status {status} without a reason"
    assert "my_work.ipynb" in statuses["renamed-notebook"][1]
    for finding in ("graded cell 'test_shares_storage' was deleted", "locked cell 'test_flatten_features' was edited",
                    "graded test cell 'test_linear_forward' appears more than once",
                    "unknown grade id 'test_to_class_labels_renamed'"):
        assert finding in statuses["tampered-four-ways"][1], statuses["tampered-four-ways"]
    assert "not valid JSON" in statuses["corrupt-json"][1]


def test_long_output_is_cut_not_punished(graded_class):
    """3.6 MB of honest debug prints: kept to 1000 lines per cell and to the 1 MB cap, graded in full."""
    root, _, _, report = graded_class
    entry = next(s for s in report["submissions"] if s["student"] == "long-debug-print")
    assert any("output past 1 MB was dropped" in note for note in entry.get("notes", [])), entry
    nb = nbformat.read(root / "autograded" / "long-debug-print" / LESSON / f"{LESSON}.ipynb", as_version=4)
    streams = [o.text for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []) if o.output_type == "stream"]
    assert streams and all(text.count("\n") <= 1002 for text in streams)
    # the demo cell that calls shares_storage shows the start of the prints and says the rest was cut
    assert any(re.search(r"Output truncated|more lines not kept|output past 1 MB", text) for text in streams)


def test_scores_are_what_the_answers_deserve(graded_class):
    root, cases, proc, _ = graded_class
    recorded = scores_by_exercise(root)
    for student, (_, _, _, expected) in cases.items():
        if student in ("corrupt-json", "renamed-notebook", "empty-folder"):
            assert student not in recorded or all(v == 0 for v in recorded[student].values())
            continue
        assert recorded[student] == expected, f"{student}: {recorded[student]} != {expected}\n{proc.stderr}"


def test_grades_csv(graded_class):
    root, cases, _, _ = graded_class
    with open(root / "grades.csv", newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert set(rows) == set(cases)
    for student, (_, _, status, expected) in cases.items():
        row = rows[student]
        assert row["assignment"] == LESSON and (row["status"] == status or status is None)
        assert float(row["max_score"]) == 10.0, "a deleted or missing cell must not change the maximum"
        assert float(row["score"]) == sum(expected.values()), student


def feedback_text(root: Path, student: str) -> str:
    import html as htmllib
    import re

    raw = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
    return htmllib.unescape(re.sub(r"<[^>]+>", "", raw))


def test_feedback_shows_messages_not_hidden_tests(graded_class):
    root, cases, _, _ = graded_class
    source = nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    hidden_lines = set()
    for entry in kit.exercises(source).values():
        visible, hidden = protocol.split_hidden(entry["test"].source)
        hidden_lines |= {line.strip() for line in hidden.splitlines()
                         if len(line.strip()) > 15 and line.strip() not in visible}
    # a line the release itself shows elsewhere (`with torch.no_grad():` in a demo) is no leak
    release_text = "\n".join(c.source for c in kit.release_notebook(root, LESSON).cells)
    hidden_lines = {line for line in hidden_lines if line not in release_text}
    # the first test cell runs before any hidden code: its visible message is shown; later test cells show
    # the grader's verdict only (their output could carry the hidden tests that ran before them)
    text = feedback_text(root, "trick-displayhook-partial-credit")
    assert "CheckFailed" in text and "shares_storage" in text
    assert "VisibleCheckFailed" in feedback_text(root, "patch-torch-top-level")
    checked = 0
    for student in cases:
        path = root / "feedback" / student / LESSON / f"{LESSON}.html"
        if not path.exists():
            continue
        text = feedback_text(root, student)
        leaked = [line for line in hidden_lines if line in text]
        assert not leaked, f"{student}: hidden test code in the feedback: {leaked[:3]}"
        assert SECRET_CODE not in text and SECRET_VALUE not in text, f"{student}: a hidden marker is in the feedback"
        checked += 1
    assert checked >= 20
    assert "HiddenTestFailed" in feedback_text(root, "hidden-only-wrong")


def test_sandbox_hides_course_and_network(graded_class, listener):
    root, _, _, report = graded_class
    _, hits = listener
    assert report["sandbox"] == "bwrap"
    spy = next(s for s in report["submissions"] if s["student"] == "spy")
    assert spy["score"] == 8.0, "the spy read course files or reached the network"
    assert not hits, "a submission connected to a loopback server"


def test_fork_bomb_is_contained(graded_class):
    """The fork bomb stopped at its caps, nothing of it outlived grading, and the neighbours were graded."""
    _, _, _, report = graded_class
    by_student = {s["student"]: s for s in report["submissions"]}
    assert by_student["fork-bomb"]["status"] in FORK_BOMB_STATUSES
    assert by_student["fork-bomb"]["score"] == 8.0
    survivors = battery_survivors()
    assert not survivors, f"sandboxed processes outlived grading: {survivors}"
    honest = [s for s in report["submissions"] if s["student"] in ("honest-solution", "legitimate-styles")]
    assert all(s["status"] == "graded" and s["score"] == 10.0 for s in honest), honest


def test_gradebook_backed_up(graded_class):
    root, _, _, report = graded_class
    assert report["gradebook_backup"] and Path(report["gradebook_backup"]).is_file()


def test_a_killed_regrade_can_be_rerun_and_keeps_manual_grades(graded_class):
    """A regrade killed midway, then run again: the rerun is not refused, gives the same automatic scores, and
    leaves an instructor's manual score alone (set before the killed run, so neither run may overwrite it)."""
    root, cases, _, _ = graded_class
    from nbgrader.api import Gradebook

    subset = ["honest-solution", "honest-untouched", "tampered-four-ways"]
    students = [arg for student in subset for arg in ("--student", student)]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        grade = gb.find_grade("test_shares_storage", LESSON, LESSON, "honest-untouched")
        grade.manual_score = 1.5
        gb.db.commit()
    cmd = [sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2", *students]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(4)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    again = run_grade(root, *students)
    assert again.returncode == 3, again.stderr   # tampered again: nothing else needs attention
    rerun = json.loads((root / "grading-report.json").read_text())["submissions"]
    statuses = {s["student"]: s["status"] for s in rerun}
    assert statuses == {s: cases[s][2] for s in subset}, again.stderr
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        grade = gb.find_grade("test_shares_storage", LESSON, LESSON, "honest-untouched")
        assert grade.score == 1.5, "the regrade overwrote the instructor's manual score"
        grade.manual_score = None
        gb.db.commit()
    recorded = scores_by_exercise(root)
    assert {s: recorded[s] for s in subset} == {s: cases[s][3] for s in subset}
    rows = {r["student_id"]: r for r in csv.DictReader((root / "grades.csv").read_text().splitlines())}
    assert float(rows["honest-untouched"]["score"]) == 1.5, "the export after the regrade shows the manual score"


@pytest.mark.parametrize("args,message", [
    (["--assignment", "99_nope"], "unknown assignment"),
    (["--student", "nobody-here"], "no submissions folder for student"),
    (["--jobs", "0"], "--jobs must be"),
    (["--shard", "3/2"], "--shard"),
])
def test_bad_arguments_exit_2(graded_class, args, message):
    root, _, _, _ = graded_class
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(root), *args],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_missing_course_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
