"""Grades you can trust: nothing a student plants is followed, nothing hidden reaches feedback, and
honest output never costs points (all under one `python -m autograder grade`, next to an honest student).

- Collection refuses what is not a regular file inside ``submitted/<student>/<assignment>/``: a
  notebook that is a symbolic link to the solution, a student folder that is a link to a
  classmate's, a FIFO, a notebook above the size cap. A ``timestamp.txt`` that links elsewhere is
  not copied. Each gets a status and a reason; nothing crashes.
- Hidden code, hidden inputs and hidden expected values carry marker strings (in the course's copy
  of the solution); a correct submission prints every place the kernel keeps them (``In``, ``_ih``,
  the history, the frames, linecache, the garbage collector's objects) from inside the tested
  function and from a later cell. Its feedback holds no marker, and it keeps full marks.
- The feedback page carries hints, never hidden labels, code or inputs, whatever a submission does while the
  hidden part runs (issue 48): four probes (tests/support/probekit.py) patch the kernel side while the hidden
  tests run; no page, theirs or the honest student's, holds a hidden label, input or expected value.
- A correct submission that writes to stderr, warns, and prints past the output cap inside a test
  cell keeps full marks, the same when regraded alone (the battery regrades honest ones: test_grading.py).
- A kernel stays in its CPU set and its runtime folder is a small tmpfs (one correct submission that also plants
  the timestamp link tries both).
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import course

import coursekit as kit
import probekit
from test_grading import EXERCISES, FULL, LESSON, ZERO, ensure_bubblewrap, feedback_text

CODE_MARKER, VALUE_MARKER, INPUT_MARKER = "HIDDEN-CODE-MARK-3141", "HIDDEN-VALUE-MARK-2718", 77123.0

NOISY = {  # correct answers that write to stderr, warn, and print a lot inside the tests
    "shares_storage": ("import sys, warnings\n"
                       "def shares_storage(a, b):\n"
                       "    print('debug: comparing storages', file=sys.stderr)\n"
                       "    warnings.warn('a UserWarning from the student')\n"
                       "    sa, sb = a.untyped_storage(), b.untyped_storage()\n"
                       "    a_end, b_end = sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes()\n"
                       "    return max(sa.data_ptr(), sb.data_ptr()) < min(a_end, b_end)\n"),
    # flatten_features runs about 20 times in the lesson: 4 MB in all, under the 10 MB output limit
    "flatten_features": ("def flatten_features(x):\n"
                         "    print('y' * 200_000)\n"
                         "    n, k = x.shape[0], x.shape[1:].numel()\n"
                         "    kept = [(s, st) for s, st in zip(x.shape[1:], x.stride()[1:]) if s != 1]\n"
                         "    if all(o == s * i for (_, o), (s, i) in zip(kept, kept[1:])):\n"
                         "        return x.as_strided((n, k), (x.stride(0), kept[-1][1] if kept else 1)"
                         ", x.storage_offset())\n"
                         "    return x.contiguous().as_strided((n, k), (k, 1))\n"),
}
SNOOP = (  # prints every place where the kernel keeps what the hidden tests did
    "def _snoop():\n"
    "    import gc, inspect, linecache\n"
    "    ip = get_ipython()\n"
    "    print(ip.user_ns.get('In'), ip.user_ns.get('_ih'))\n"
    "    print(list(ip.history_manager.get_range(output=False)))\n"
    "    for frame in inspect.stack():\n"
    "        print(frame.code_context, {k: repr(v)[:300] for k, v in frame.frame.f_locals.items()})\n"
    "    print([''.join(entry[2]) for name, entry in linecache.cache.items()\n"
    "           if len(entry) > 2 and not name.endswith('.py')])\n"
    "    print([o for o in gc.get_objects() if isinstance(o, str) and ('hidden' in o or 'MARK' in o)][:500])\n"
    "    print([repr(o)[:200] for o in gc.get_objects() if type(o).__name__ in ('ndarray', 'Tensor')][:500])\n"
    "def to_class_labels(arr):\n"
    "    _snoop()\n"
    "    print('argument:', arr)\n"
    "    if arr.ndim == 2:\n"
    "        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)\n"
    "    bad = [v for v in arr.tolist() if not (v >= 0 and v % 1 == 0)] if arr.ndim == 1 else [arr.shape]\n"
    "    if bad:\n"
    "        raise ValueError(f'bad labels: {bad}')\n"
    "    return torch.tensor(arr, dtype=torch.long)\n")


WIDEN_AFFINITY = ("import os\n"
                  "try:\n    os.sched_setaffinity(0, set(range(os.cpu_count())))\nexcept OSError:\n    pass\n"
                  "print('cpus after widening:', sorted(os.sched_getaffinity(0)))\n")
# ... and tries to fill the one folder it shares with the grader (where its connection file is) with 64 MB
FILL_RUNTIME = ("import sys\n"
                "runtime = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])\n"
                "written = 0\n"
                "try:\n"
                "    with open(os.path.join(runtime, 'ballast'), 'wb') as f:\n"
                "        for _ in range(64):\n"
                "            f.write(b'x' * 2**20)\n"
                "            f.flush()\n"
                "            written += 1\n"
                "except OSError as exc:\n"
                "    print('runtime write stopped:', exc.errno)\n"
                "print('runtime MB written:', written)\n")


def plant_markers(root: Path) -> None:
    """to_class_labels' hidden test gets a marker in its code, in an input and in an expected value."""
    path = root / "solutions" / LESSON / f"{LESSON}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = kit.exercises(nb)["to_class_labels"]["test"]
    marker = (f"# {CODE_MARKER}\n"
              f"hidden.observe('pte-planted-marker', {VALUE_MARKER!r} + "
              f"str(checks.call(to_class_labels, np.array([{INPUT_MARKER!r}])).dtype))\n")
    cell.source = cell.source.replace("hidden.done()", marker + "hidden.done()")
    nbformat.write(nb, path)
    course.execute_in_place(path)
    subprocess.run(course.nbgrader_cmd("generate_assignment", LESSON, "--force", "--log-level=ERROR"),
                   cwd=root, check=True)


PLANTER = "widens-affinity-links-timestamp"


def grade(root: Path, *students: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2", "--timeout-s", "120",
           "--cell-timeout-s", "30", "--memory-mb", "1500", "--output-mb", "1"]
    return subprocess.run(cmd + [arg for s in students for arg in ("--student", s)], capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    assert ensure_bubblewrap(), "bubblewrap must work here"
    base = tmp_path_factory.mktemp("trust")
    root = kit.make_scratch_course(base / "course", [LESSON])
    plant_markers(root)
    release_nb = kit.release_notebook(root, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    secret = base / "outside-the-course.txt"
    secret.write_text("ROOT-ONLY-FILE-CONTENT\n")
    name = f"{LESSON}.ipynb"

    def folder(student: str) -> Path:
        target = root / "submitted" / student / LESSON
        target.mkdir(parents=True)
        return target

    kit.submit(root, "honest", LESSON, kit.fill_answers(release_nb, solution_nb))
    kit.submit(root, "noisy", LESSON, kit.fill_answers(release_nb, solution_nb, NOISY))
    leaky = kit.fill_answers(release_nb, solution_nb, {"to_class_labels": SNOOP})
    later = nbformat.v4.new_code_cell("_snoop()")
    later["id"] = "student-snoop"
    leaky.cells.append(later)
    kit.submit(root, "leaky", LESSON, leaky)
    # correct answers that widen the CPU set and fill the runtime folder, beside a timestamp.txt that is a link
    planter = kit.fill_answers(release_nb, solution_nb)
    grab = nbformat.v4.new_code_cell(WIDEN_AFFINITY + FILL_RUNTIME)
    grab["id"] = "student-affinity"
    setup = next(i for i, c in enumerate(planter.cells) if c.cell_type == "code")
    planter.cells.insert(setup + 1, grab)
    kit.submit(root, PLANTER, LESSON, planter)
    os.symlink(secret, root / "submitted" / PLANTER / LESSON / "timestamp.txt")
    probekit.submit_probes(root, release_nb, solution_nb)
    os.symlink(Path("..", "..", "..", "solutions", LESSON, name), folder("symlink-notebook") / name)
    (root / "submitted" / "symlink-folder").symlink_to("honest")
    os.mkfifo(folder("fifo-notebook") / name)
    (folder("huge-notebook") / name).write_text('{"cells": [], "pad": "' + "z" * (21 * 2**20) + '"}')
    proc = grade(root)
    report = json.loads((root / "grading-report.json").read_text())
    with open(root / "grades.csv", newline="") as handle:
        first_rows = {r["student_id"]: r for r in csv.DictReader(handle) if r["student_id"] in ("honest", "noisy")}
    return root, proc, {s["student"]: s for s in report["submissions"]}, first_rows


EXPECTED = {
    "honest": ("graded", FULL),
    "noisy": ("graded", FULL),
    "leaky": ("graded", FULL),
    PLANTER: ("graded", FULL),
    "probe-inspect": ("graded", FULL),
    **{probe: ("graded", {exercise: 0.0 for exercise in FULL}) for probe in ("probe-malformed", "probe-raise",
                                                                            "probe-forge")},
    "symlink-notebook": ("refused", ZERO),
    "symlink-folder": ("refused", ZERO),
    "fifo-notebook": ("refused", ZERO),
    "huge-notebook": ("refused", ZERO),
}


def test_statuses_and_scores(graded):
    root, proc, results, _ = graded
    assert {s: r["status"] for s, r in results.items()} == {s: e[0] for s, e in EXPECTED.items()}, proc.stderr
    recorded = kit.scores(root, LESSON)
    for student, (_, scores) in EXPECTED.items():
        assert recorded.get(student, ZERO) == scores, f"{student}: {recorded.get(student)}\n{proc.stderr}"
    for student in ("symlink-notebook", "symlink-folder", "fifo-notebook", "huge-notebook"):
        assert results[student]["reason"], student
    assert "symbolic link" in results["symlink-notebook"]["reason"]
    assert "symbolic link" in results["symlink-folder"]["reason"]
    assert "regular file" in results["fifo-notebook"]["reason"]
    assert "MB" in results["huge-notebook"]["reason"]


def test_nothing_planted_is_copied_or_shown(graded):
    root, _, results, _ = graded
    staged = root / ".grading" / "staged" / PLANTER / LESSON
    assert not (staged / "timestamp.txt").exists()
    assert any("timestamp.txt ignored" in note for note in results[PLANTER]["notes"])
    for student in ("symlink-notebook", "symlink-folder"):
        assert not (root / "feedback" / student).exists(), f"{student}: feedback was made from a planted link"
    for path in (root / "feedback").rglob("*.html"):
        assert "ROOT-ONLY-FILE-CONTENT" not in path.read_text()


def test_feedback_never_carries_hidden_tests(graded):
    root, *_ = graded
    for student in ("honest", "noisy", "leaky", PLANTER):
        text = feedback_text(root, student)
        for marker in (CODE_MARKER, VALUE_MARKER, str(INPUT_MARKER)):
            assert marker not in text, f"{student}: {marker} is in the feedback"
    autograded = (root / "autograded" / "leaky" / LESSON / f"{LESSON}.ipynb").read_text()
    assert CODE_MARKER not in autograded and VALUE_MARKER not in autograded
    # what a student still sees: the verdict of every test and the first test cell's own messages
    assert "All checks passed: shares_storage" in feedback_text(root, "honest")


def test_the_probes_are_graded_and_say_a_hidden_check_failed(graded):
    """probe-malformed, probe-raise and probe-forge each sent no right observation (0 points: test_statuses_and_
    scores); the page says a hidden check failed."""
    root, *_ = graded
    for student in ("probe-malformed", "probe-raise", "probe-forge"):
        assert "HiddenTestFailed" in probekit.page(root, student), student


def test_no_page_holds_a_hidden_label_input_or_expected_value(graded):
    root, *_ = graded
    needles = probekit.hidden_needles(root)
    assert len(needles["label"]) >= 30 and len(needles["expected value"]) >= 100 and needles["code"], needles
    for student in ("honest", *probekit.PROBES):
        page = probekit.page(root, student)
        leaked = {kind: sorted(n for n in found if n in page)[:3] for kind, found in needles.items()}
        assert not any(leaked.values()), f"{student}'s feedback page holds hidden {leaked}"
    # the page still says which hidden check failed, and shows its hint (the reference's words)
    page = probekit.page(root, "probe-malformed")
    assert re.search(r"hidden check 1 of \d+", page), page[-2000:]


def test_honest_noise_keeps_full_marks_when_regraded(graded):
    """The noisy student alone, graded again: the same rows as the class's run (the battery regrades honest ones:
    test_grading.py). Runs after the tests above, which read the class run's pages."""
    root, _, _, first_rows = graded
    assert set(first_rows) == {"honest", "noisy"}, first_rows
    assert all(float(r["score"]) == 10.0 for r in first_rows.values()), first_rows
    proc = grade(root, "noisy")
    assert proc.returncode == 0, proc.stderr
    with open(root / "grades.csv", newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle) if r["student_id"] in ("honest", "noisy")}
    assert rows == first_rows, (rows, first_rows)
    assert len(EXERCISES) == 5


def test_a_kernel_stays_in_its_cpuset(graded):
    """Each job's kernel has a cgroup of its own (this host has cgroup v1's cpuset, memory and pids, writable
    as root): sched_setaffinity cannot widen it beyond the one CPU of its slot (--jobs 2 on 2 cores)."""
    root, proc, _, _ = graded
    report = json.loads((root / "grading-report.json").read_text())
    assert report["cgroups"] in ("v1", "v2"), proc.stderr
    nb = nbformat.read(root / "autograded" / PLANTER / LESSON / f"{LESSON}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "student-affinity")
    text = "".join(o.get("text", "") for o in cell.outputs)
    cpus = text.split("cpus after widening:")[1].strip()
    assert cpus.count(",") == 0, f"the kernel widened its CPU set: {text!r}"


def test_the_runtime_folder_is_a_small_tmpfs(graded):
    """The runtime folder (connection file, sockets) is the one folder a kernel shares with the grader: as
    root it is a tmpfs of its own, so a kernel that writes 64 MB there stops at its cap, on no host disk."""
    from autograder.grading.isolate import sandbox

    root, *_ = graded
    nb = nbformat.read(root / "autograded" / PLANTER / LESSON / f"{LESSON}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "student-affinity")
    text = "".join(o.get("text", "") for o in cell.outputs)
    written = int(text.split("runtime MB written:")[1].split()[0])
    assert "runtime write stopped: 28" in text and written < sandbox.RUNTIME_MB, text   # 28: ENOSPC
