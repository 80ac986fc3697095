"""The class report, proven exact on a graded class: every count on the page and in its CSV files equals the
number of students planted to make it, and nothing hidden reaches the page.

One class of lesson 01 is graded once for the module (the grading command, sandboxed, as an instructor runs it),
plus two earlier runs of the feedback service's course folder for two students' attempts (each grading the
attempt's students alone, as the service does). The students:

- ``honest-a``: the solutions (two more, until issue 47, only made the predictions' right answers: others do);
- ``mistakes-J``: the J-th listed pitfall of every exercise that has one (tests/course/pitfalls), and
  ``mistakes-0-again`` the first ones again, so each listed mistake is made by a known number of students;
- ``hidden-only``: the wrong answers of the table that pass every visible check and fail a hidden one (one per
  exercise past the first two, which the attempts use);
- ``leaky``: a to_class_labels that fails only a hidden check this test plants in the scratch course's solution
  (its label and values are distinctive: neither may reach the page), and prints distinctive text;
- ``retry-1`` (wrong, then right) and ``retry-2`` (a mistake in its one attempt, then once more in the class run);
- a prediction cell added to the scratch solution (its answer stripped from the release); five students write
  predictions: three right (a tuple or a list; ``honest-a``, ``retry-1``, ``hidden-only``), one wrong, one unreadable
  (a call).
"""
from __future__ import annotations

import csv
import html
import html.parser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import classreport, course
from autograder.grading.intake import predictions as read_predictions
from autograder.grading.judging import outcomes
from autograder.kernel.vocabulary import protocol

import coursekit as kit
from test_grading import LESSON, ensure_bubblewrap

PITFALLS = kit.load_pitfalls(LESSON)
HIDDEN_ONLY = kit.load_pitfall_module(LESSON).HIDDEN_ONLY
MESSAGES = json.loads((kit.REPO / "tests" / "course" / "pitfalls" / f"{LESSON}.messages.json").read_text())
PLANTED_LABEL, PLANTED_VALUES = "PLANTED-HIDDEN-LABEL-5521", [88771, 66123]
PLANTED_HINT = "class numbers in the tens of thousands stay exact."
KERNEL_TEXT = "KERNEL-SAID-3141"
LEAKY_CELL = f"planted_probe = [88772, 66123]\nprint('{KERNEL_TEXT}')\n"   # the planted check's value, wrong
PREDICTION = {"id": f"{LESSON}:probe", "kind": "shape", "answer": [2, 3]}
# the right answer by three students (two tuples, a list: one answer), whatever their exercises earn
PREDICTED = {"honest-a": "(2, 3)", "retry-1": "(2, 3)", "hidden-only": "[2, 3]", "mistakes-0": "(3, 2)",
             "mistakes-1": "torch.Size([2, 3])"}
MIN_GROUP = 2


def graded_tests() -> dict[str, float]:
    """The lesson's graded test cells and their points, in order (the lesson may change: the class follows it)."""
    nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    return {protocol.nbgrader_meta(c)["grade_id"]: float(protocol.nbgrader_meta(c)["points"])
            for c in nb.cells if protocol.is_test_cell(c)}


TESTS = graded_tests()
EXERCISES = [protocol.exercise_of(t) for t in TESTS if protocol.exercise_of(t) in PITFALLS]
PLANTED_TEST = next(iter(TESTS))


def mistakes(j: int) -> dict[str, str]:
    return {ex: list(PITFALLS[ex].values())[j] for ex in EXERCISES if j < len(PITFALLS[ex])}


def pitfall_names(j: int) -> dict[str, str]:
    return {ex: list(PITFALLS[ex])[j] for ex in EXERCISES if j < len(PITFALLS[ex])}


FIRST, SECOND = EXERCISES[0], EXERCISES[1]
HIDDEN = {ex: next(iter(answers.values())) for ex, answers in HIDDEN_ONLY.items()
          if f"test_{ex}" in TESTS and ex not in (FIRST, SECOND)}
# student -> (exercise -> wrong answer): the class as graded at the end
CLASS = {"honest-a": {},
         **{f"mistakes-{j}": mistakes(j) for j in range(max(len(PITFALLS[ex]) for ex in EXERCISES))},
         "mistakes-0-again": mistakes(0), "hidden-only": HIDDEN, "leaky": {},
         "retry-1": {}, "retry-2": {SECOND: mistakes(0)[SECOND]}}
# the feedback service's runs, in order: retry-2's one attempt is its last too (a second, the same, proved nothing more)
ATTEMPTS = [{"retry-1": {FIRST: mistakes(0)[FIRST]}, "retry-2": {SECOND: mistakes(0)[SECOND]}},
            {"retry-1": {}}]
VISIBLE_WRONG = {s: {ex for ex, src in over.items() if src in PITFALLS[ex].values()} for s, over in CLASS.items()}


def scratch_course(root: Path) -> Path:
    """Lesson 01 with a prediction cell and a planted hidden check (of a value the solution does not define) in
    its solution, released as the course does it (nbgrader, then the release's finishing step, which strips the
    prediction's answer)."""
    kit.make_scratch_course(root, [])
    shutil.copytree(kit.REPO / "solutions" / LESSON, root / "solutions" / LESSON)
    path = root / "solutions" / LESSON / f"{LESSON}.ipynb"
    nb = nbformat.read(path, as_version=4)
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    cell = nbformat.v4.new_code_cell("# the shape of torch.zeros(2, 3), as a tuple\nprediction_probe = None\n")
    cell["id"], cell.metadata["pte"] = "prediction-probe", {"prediction": dict(PREDICTION)}
    nb.cells.insert(setup + 1, cell)
    test = next(c for c in nb.cells if protocol.nbgrader_meta(c).get("grade_id") == PLANTED_TEST)
    client = re.search(r"(\w+)\.done\(\)", test.source).group(1)
    planted = (f"{client}.observe({PLANTED_LABEL!r}, globals().get('planted_probe', {PLANTED_VALUES}),\n"
               f"               hint={PLANTED_HINT!r})\n{client}.done()")
    test.source = test.source.replace(f"{client}.done()", planted, 1)
    nbformat.write(nb, path)
    kit.generate_assignments(root, [LESSON])   # the class's course and the service's: one nbgrader start per run
    course._finish_release(root / "notebooks" / LESSON / f"{LESSON}.ipynb")
    return root


def submission(root: Path, overrides: dict[str, str], predicted: str | None = None, leaky: bool = False):
    nb = kit.fill_answers(kit.release_notebook(root, LESSON),
                          nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4), overrides)
    if leaky:
        extra = nbformat.v4.new_code_cell(LEAKY_CELL)
        extra["id"] = "student-probe"
        nb.cells.insert(next(i for i, c in enumerate(nb.cells) if c.cell_type == "code") + 1, extra)
    if predicted is not None:
        cell = next(c for c in nb.cells if c.get("id") == "prediction-probe")
        cell.source = f"# the shape of torch.zeros(2, 3), as a tuple\nprediction_probe = {predicted}\n"
    return nb


def grade(root: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2", "--timeout-s", "180",
           "--cell-timeout-s", "60", "--memory-mb", "1500", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500)


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    assert ensure_bubblewrap(), "bubblewrap must work here"
    root = scratch_course(tmp_path_factory.mktemp("classreport"))
    service = root / ".grading" / "feedback-service" / "course"
    service.parent.mkdir(parents=True, exist_ok=True)
    scratch_course(service)
    for attempt in ATTEMPTS:   # the feedback service's runs: one per attempt, in its own course folder
        for student, overrides in attempt.items():
            kit.submit(service, student, LESSON, submission(service, overrides))
        # the students of this attempt, as the service names them; one grading process (its warm template costs
        # ~3 CPU-s) serves them all
        proc = grade(service, "--jobs", "1", *(arg for student in attempt for arg in ("--student", student)))
        assert proc.returncode == 0, proc.stderr[-3000:]
    for student, overrides in CLASS.items():
        kit.submit(root, student, LESSON, submission(root, overrides, PREDICTED.get(student), student == "leaky"))
    proc = grade(root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = subprocess.run([sys.executable, "-m", "autograder", "report", "--course", str(root), "--min-group",
                             str(MIN_GROUP)], capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    return root


class Tables(html.parser.HTMLParser):
    """Every table of a page as rows of cell texts."""

    def __init__(self, text: str):
        super().__init__()
        self.tables, self._cell = [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def reference(root: Path) -> dict[str, list[dict]]:
    return protocol.Reference.read(root / "solutions" / LESSON / protocol.REFERENCE_FILE).cells


def planted_index(root: Path) -> int:
    """The planted hidden check's number: the last of its cell (it was added before the cell's done())."""
    found = rows(root / "class-report-checks.csv")
    return max(int(r["index"]) for r in found if r["grade_id"] == PLANTED_TEST and r["part"] == "hidden")


def planted_failures(root: Path) -> dict[tuple[str, str, int], int]:
    """(grade id, part, index) -> how many students this class planted to fail it (the hidden-only answers'
    hidden checks apart: the table says only that each fails some hidden check)."""
    found = {}
    for wrong in VISIBLE_WRONG.values():
        for ex in wrong:
            found[(f"test_{ex}", "visible", 0)] = found.get((f"test_{ex}", "visible", 0), 0) + 1
    found[(PLANTED_TEST, "hidden", planted_index(root))] = 1
    return found


def test_each_exercise_counts_the_students_planted_to_lose_it(reported):
    expected = []
    for test, points in TESTS.items():
        ex = protocol.exercise_of(test)
        none = sum(1 for s, over in CLASS.items() if ex in over or (s == "leaky" and test == PLANTED_TEST))
        to_pass = [next((n for n, a in enumerate((a for a in ATTEMPTS if s in a), 1) if ex not in a[s]), 0)
                   for s in ("retry-1", "retry-2")]
        passed = sorted(n for n in to_pass if n)
        expected.append({"assignment": LESSON, "exercise": ex, "max_points": f"{points:g}", "students": str(len(CLASS)),
                         "full": str(len(CLASS) - none), "partial": "0", "none": str(none),
                         "mean_points": f"{points * (len(CLASS) - none) / len(CLASS):.4f}",
                         "students_with_attempts": "2", "passed_first_attempt": str(to_pass.count(1)),
                         "median_attempts_to_pass": f"{(passed[0] + passed[-1]) / 2:g}" if passed else "",
                         "never_passed": str(to_pass.count(0))})
    assert rows(reported / "class-report.csv") == expected
    page = Tables((reported / "class-report.html").read_text()).tables[0]
    assert [r[:6] + r[7:] for r in page[1:]] == [
        [e["exercise"], e["max_points"], e["students"], e["full"], e["partial"], e["none"], e["students_with_attempts"],
         e["passed_first_attempt"], e["median_attempts_to_pass"], e["never_passed"]] for e in expected]


def test_each_check_counts_the_planted_failures_with_the_course_s_hint(reported):
    planted = planted_failures(reported)
    checks = {(r["grade_id"], r["part"], int(r["index"])): r for r in rows(reported / "class-report-checks.csv")}
    assert all(int(r["students"]) == len(CLASS) for r in checks.values())
    hidden_only = {k: int(r["failed"]) for k, r in checks.items()
                   if k[1] == "hidden" and protocol.exercise_of(k[0]) in HIDDEN and int(r["failed"])}
    assert {k: int(r["failed"]) for k, r in checks.items() if int(r["failed"]) and k not in hidden_only} == planted
    for ex in HIDDEN:   # one student, failing one or more of the cell's hidden checks, none of its visible ones
        assert 1 <= sum(n for k, n in hidden_only.items() if k[0] == f"test_{ex}") and \
            {n for k, n in hidden_only.items() if k[0] == f"test_{ex}"} == {1}, ex
    students = {r["student_id"]: r for r in rows(reported / "class-report-students.csv") if r["failed_checks"]}
    assert {r["exercise"] for s, r in students.items() if s == "hidden-only"} <= set(HIDDEN)
    for key, row in checks.items():   # a cell's hidden checks do not run after its visible part failed
        if key[1] == "hidden" and protocol.exercise_of(key[0]) not in HIDDEN:
            assert int(row["not_run"]) == planted.get((key[0], "visible", 0), 0), (key, row)
    mine = checks[(PLANTED_TEST, "hidden", planted_index(reported))]
    assert (mine["kinds"], mine["hint"], mine["failed"]) == ("values 1", PLANTED_HINT, "1")


def test_a_visible_failure_is_named_by_the_course_s_sentence_for_each_planted_mistake(reported):
    """Each listed pitfall's visible message (as the pitfall table recorded it) names one sentence of the course;
    the report counts that sentence once per student who made the mistake, and the page shows the commonest."""
    checks = {(r["grade_id"], r["part"], int(r["index"])): r for r in rows(reported / "class-report-checks.csv")}
    sentences = outcomes.visible_hints("")
    page = (reported / "class-report.html").read_text()
    for ex in EXERCISES:
        planted: dict[str, int] = {}
        for over in CLASS.values():
            j = next((j for j in range(len(PITFALLS[ex])) if over.get(ex) == mistakes(j).get(ex)), None)
            if j is not None:
                said = outcomes._quoted(sentences, {"evalue": MESSAGES[f"{ex}: {pitfall_names(j)[ex]}"]})
                if said:
                    planted[said] = planted.get(said, 0) + 1
        assert json.loads(checks[(f"test_{ex}", "visible", 0)]["hints_named"]) == planted, ex
        assert all(html.escape(sentence) in page for sentence in planted if planted[sentence] == max(planted.values()))


def test_the_checks_that_failed_first_and_last_follow_the_attempts(reported):
    checks = {(r["grade_id"], r["part"], int(r["index"])): r for r in rows(reported / "class-report-checks.csv")}
    moved = {("test_shares_storage", "visible", 0): ("1", "0"), ("test_flatten_features", "visible", 0): ("1", "1")}
    assert {k: (r["failed_first_attempt"], r["failed_last_attempt"]) for k, r in checks.items()
            if (r["failed_first_attempt"], r["failed_last_attempt"]) != ("0", "0")} == moved


def test_predictions_spread_against_the_right_answer_and_the_release_hides_it(reported):
    release = kit.release_notebook(reported, LESSON)
    assert all("answer" not in (read_predictions.meta(c) or {}) for c in release.cells)
    assert PREDICTION["id"] in [r.id for r in read_predictions.read_cells(release.cells)]
    table = next(t for t in Tables((reported / "class-report.html").read_text()).tables if t[0][0] == "prediction")
    row = next(r for r in table if r[0] == PREDICTION["id"])
    assert row[:7] == [PREDICTION["id"], "shape", "(2, 3)", "4", "3", str(len(CLASS) - 5), "1"]
    assert row[7] == "(2, 3) (right): 3; other answers: 1", "(3, 2) was one student's: counted, not shown"


def test_nothing_hidden_and_no_student_reaches_the_page(reported):
    page = (reported / "class-report.html").read_text()
    shown = page + (reported / "class-report.csv").read_text() + (reported / "class-report-checks.csv").read_text()
    leaks = [PLANTED_LABEL, KERNEL_TEXT, *map(str, PLANTED_VALUES), "88772"]
    leaks += [entry["label"] for entries in reference(reported).values() for entry in entries]
    assert [text for text in leaks if text in shown] == []
    assert [s for s in CLASS if s in page] == [], "the page counts; names are in the instructor's CSV only"
    students = reported / "class-report-students.csv"
    assert students.stat().st_mode & 0o077 == 0 and {r["student_id"] for r in rows(students)} == set(CLASS)
    served = classreport.page(reported, LESSON, min_group=MIN_GROUP)   # what the hub's route serves
    assert Tables(served).tables == Tables(page).tables and f"Class report: {reported.name}, {LESSON}" in served
