"""Each graded cell's checks, one :class:`CheckResult` each, for the report and the class report.

Decided from what the judge trusts and nothing else. A hidden check's outcome is
``observations.compare`` of the kernel's observation with the reference (the kind of difference only, never
the values) and its hint is the reference's. The visible part of a test cell is one entry: whether it
raised, the exception's type name only when it is one the course or Python defines (a student can raise a
class of any name), and the hint only as a literal of the instructor's visible test code or of the course's
kernel package (the checks' helpers) that the failure quoted: the kernel can pick one of the course's own
sentences at most, never write one. Hidden inputs,
expected values, labels (which name inputs) and anything else the kernel printed stay out.

Computed before :func:`autograder.grading.judging.judge.settle` rewrites the notebook (it drops the
visible part's observations).
"""
from __future__ import annotations

import ast
import builtins
import functools
from pathlib import Path

from autograder import kernel
from autograder.grading.messages import CheckResult
from autograder.grading.status import Status
from autograder.kernel.vocabulary import observations, protocol
from autograder.kernel.vocabulary.messages import Observation

# exception type names reported as themselves: Python's own and the course's check failure
KNOWN_EXCEPTIONS = frozenset(
    [name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)]
    + ["CheckFailed", "HiddenTestFailed", "OutputFlood"])
CHECK_FAILURES = ("AssertionError", "CheckFailed")   # a check said no (anything else: the code raised)
MIN_HINT_WORDS = 4
LIKELY = "Likely mistake:"   # how the course's checks introduce the misconception (checks.fail)


def exception_name(name: object) -> str:
    return name if isinstance(name, str) and name in KNOWN_EXCEPTIONS else "other"


def _words(text: str) -> str:
    return " ".join(str(text).split())


def _sentences(source: str) -> set[str]:
    """A source's string literals of at least :data:`MIN_HINT_WORDS` words (an f-string's literal parts too)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = {_words(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return {h for h in found if len(h.split()) >= MIN_HINT_WORDS}


@functools.lru_cache(maxsize=1)
def course_sentences() -> frozenset[str]:
    """The sentences of the course's kernel package (the visible checks' helpers and their hints), read from
    the grader's own copy of its files."""
    return frozenset(h for path in sorted([*Path(kernel.__file__).parent.glob("*.py"),
                                       *Path(kernel.__file__).parent.glob("lessons/*.py")])
                     for h in _sentences(path.read_text(encoding="utf-8")))


def visible_hints(source: str) -> list[str]:
    """The sentences a test cell's visible failure may quote: the literals of its visible code and of the
    course's kernel package, longest first."""
    found = _sentences(protocol.split_hidden(source)[0]) | course_sentences()
    return sorted(found, key=lambda h: (-len(h), h))


def _quoted(candidates: list[str], error: dict) -> str:
    """The course's sentence the failure names: searched after its last "Likely mistake:" when it has one."""
    text = _words(f"{error.get('evalue', '')}")
    text = text.rsplit(LIKELY, 1)[-1]
    return next((h for h in candidates if h in text), "")


def _visible(grade_id: str, cell, run, index: int) -> CheckResult:
    error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
    if index not in run.replies:
        status = "timeout" if run.status == Status.TIMEOUT else "not-run"
        return CheckResult(grade_id, "visible", 0, 0, status, status)
    if error is None and (run.replies.get(index) == "ok" or index in run.hidden_runs):
        # the hidden part runs only after the visible part passed; the cell's reply is then the hidden part's
        return CheckResult(grade_id, "visible", 0, 0, "passed")
    if error is None:   # the reply said error without an error output: the cell was stopped
        status = "timeout" if run.status == Status.TIMEOUT else "error"
        return CheckResult(grade_id, "visible", 0, 0, status, "timeout" if status == "timeout" else "exception")
    name = exception_name(error.get("ename"))
    hint = _quoted(visible_hints(cell.source), error)
    if name in CHECK_FAILURES:
        return CheckResult(grade_id, "visible", 0, 0, "failed", "check", name, hint)
    return CheckResult(grade_id, "visible", 0, 0, "error", "exception", name, hint)


def _hidden_entry(grade_id: str, number: int, total: int, ref: dict, observed) -> CheckResult:
    hint = ref.get("hint") if isinstance(ref.get("hint"), str) else ""
    if not isinstance(observed, Observation):
        return CheckResult(grade_id, "hidden", number, total, "failed", "malformed", "", _words(hint))
    try:
        observations.to_json({"value": observed.value})
        found = observations.compare(ref, observed.value)
    except Exception:  # noqa: BLE001 - whatever the kernel sent is this check's failure alone
        return CheckResult(grade_id, "hidden", number, total, "failed", "malformed", "", _words(hint))
    if found is None:
        return CheckResult(grade_id, "hidden", number, total, "passed", hint=_words(hint))
    kind = "values" if found[0] == "value" else found[0]
    return CheckResult(grade_id, "hidden", number, total, "failed", kind, "", _words(hint))


def _hidden(grade_id: str, run, index: int, reference: list[dict], observed: list) -> list[CheckResult]:
    outputs, status = run.hidden_runs.get(index, ([], None))
    error = next((o for o in outputs if o.get("output_type") == "error"), None)
    results = []
    stopped = False
    for number, ref in enumerate(reference, 1):
        hint = _words(ref.get("hint")) if isinstance(ref.get("hint"), str) else ""
        if number <= len(observed):
            results.append(_hidden_entry(grade_id, number, len(reference), ref, observed[number - 1]))
        elif stopped or index not in run.hidden_runs:
            results.append(CheckResult(grade_id, "hidden", number, len(reference), "not-run", "not-run", "", hint))
        elif status is None or (error is None and run.status == Status.TIMEOUT):
            stopped = True
            results.append(CheckResult(grade_id, "hidden", number, len(reference), "timeout", "timeout", "", hint))
        else:
            stopped = True
            name = exception_name(error.get("ename")) if error else "other"
            results.append(CheckResult(grade_id, "hidden", number, len(reference), "error", "exception", name, hint))
    return results


def of(run, reference: dict[str, list[dict]]) -> list[CheckResult]:
    """Every check of every graded test cell of ``run`` (a :class:`runner.Run`, not yet settled), in order."""
    results: list[CheckResult] = []
    for index in sorted(run.test_cells):
        cell = run.nb.cells[index]
        grade_id = protocol.nbgrader_meta(cell).get("grade_id")
        if not isinstance(grade_id, str):
            continue
        hidden_outputs = run.hidden_runs.get(index, ([], None))[0]
        observed = protocol.observations_in(hidden_outputs) + protocol.observations_in(cell.get("outputs", []))
        results.append(_visible(grade_id, cell, run, index))
        results += _hidden(grade_id, run, index, reference.get(grade_id, []), observed)
    return results
