"""The verdict on each test cell, decided here, outside the student's kernel.

The kernel ran the instructor's test cell (hidden part included) in recording mode: its
hidden checks published observations of what the student's code produced, and nothing
else. This module compares those observations with the reference observations that
``make release`` stored from the solution. The number, order, labels and tolerances all
come from the reference; the kernel's copies of them are ignored.

A test cell passes only if its execution finished without an error *and* its
observations match the reference one for one. Feedback names the failing hidden check by
its position and the kind of difference, and shows the hint the instructor wrote for it (the
misconception it names), taken from the reference, never from the kernel; it never shows the label,
the hidden code, an input or an expected value.

:func:`settle` is the verdict step: it takes what the runner says ran (:class:`runner.Run`), judges
each test cell and rewrites the notebook so that nbgrader records the verdict: a failed test cell
carries an error output, a passed one carries none, and no test cell keeps an ``execute_result``
(nbgrader would read a number there as partial credit).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.grading.plan.settings import MAX_OBSERVATIONS
from autograder.grading.status import Status
from autograder.kernel.vocabulary import observations, protocol
from autograder.kernel.vocabulary.messages import MessageError, Observation

MEMORY_ERROR = re.compile(r"MemoryError|can't allocate memory|DefaultCPUAllocator|Cannot allocate memory")
TAINT_NOTE = ("[grader] the outputs of this cell and of every later one are not shown: they were produced after "
              "the hidden tests had run in this kernel, so they could reveal them. Run the notebook yourself "
              "to see them.\n")
# The one message about an observation the judge cannot read. Every message about a hidden check is built from
# the reference and these words alone: what the kernel sent (a field name, a label, a MIME type, the text of a
# MessageError made from it) never reaches feedback.
MALFORMED = ("the observation the kernel sent could not be read as one (malformed, of another format, or too "
             "large): the test cell's code or the grader's kernel module was changed")


@dataclass
class Verdict:
    passed: bool
    reason: str = ""


class ReferenceMissing(Exception):
    """The course has no reference observations for an assignment (run ``make release``)."""


def load_reference(source_dir: Path, assignment: str) -> dict[str, list[dict]]:
    """grade id -> reference observations, from ``<source>/<assignment>/reference_observations.json``."""
    try:
        return protocol.Reference.read(Path(source_dir) / assignment / protocol.REFERENCE_FILE).cells
    except protocol.ReferenceUnreadable as exc:
        raise ReferenceMissing(str(exc)) from None


def judge_cell(reference: list[dict], observed: list[Observation | MessageError], finished: bool) -> Verdict:
    """Decide one test cell from its reference and the kernel's (untrusted) observations, as
    :func:`protocol.observations_in` read them."""
    if not finished:
        return Verdict(False, "the test cell did not run to its end")
    if not reference:
        return Verdict(False, "this test has no reference observations (the course must run `make release`)")
    if len(observed) > MAX_OBSERVATIONS:
        return Verdict(False, f"the test cell published {len(observed)} observations")
    total = len(reference)
    for index, ref in enumerate(reference):
        if index >= len(observed):
            return Verdict(False, f"hidden check {index + 1} of {total} was never reached")
        observation = observed[index]
        if not isinstance(observation, Observation):   # its MessageError is the kernel's text: never shown
            return Verdict(False, f"hidden check {index + 1} of {total}: {MALFORMED}")
        try:
            observations.to_json({"value": observation.value})  # size cap, and plain JSON only
            found = observations.compare(ref, observation.value)
        except Exception:  # whatever the kernel sent (10**400, a cycle, a bad type): this cell's failure alone
            return Verdict(False, f"hidden check {index + 1} of {total}: {MALFORMED}")
        if found:
            return Verdict(False, f"hidden check {index + 1} of {total} failed (wrong {found[0]})" + _hint(ref))
    if len(observed) > total:
        return Verdict(False, f"the test cell published {len(observed)} observations; the test makes {total}")
    return Verdict(True)


def _hint(ref: dict) -> str:
    """The reference's hint for a failed hidden check, as feedback shows it: the instructor's words, written as a
    literal in the hidden code (tests/unit/test_hints.py holds every lesson to that), so nothing of the test's
    inputs or the kernel's output. Nothing when the check has none."""
    hint = ref.get("hint")
    if not isinstance(hint, str) or not hint.strip():
        return ""
    return f". Hint: {' '.join(hint.split())}"


# ---------------------------------------------------------------- the verdict, as nbgrader reads it

def settle(run, reference: dict[str, list[dict]]) -> None:
    """Judge each test cell of ``run`` (a :class:`runner.Run`) and make its notebook say the verdict the way
    nbgrader reads it.

    Feedback keeps the kernel's outputs only up to the first hidden part that ran: anything the
    kernel produced from then on (a later cell printing ``In``, the history, frames or objects
    left over) could carry hidden code or hidden inputs. From there on, a test cell shows only
    the grader's own verdict, and other cells show nothing."""
    nb = run.nb
    text = "".join(o.get("evalue", "") + o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    if run.status == Status.GRADED and MEMORY_ERROR.search(text):
        run.status, run.reason = Status.MEMORY_LIMIT, "an allocation failed at the memory cap"
    tainted_after = min(run.hidden_runs) if run.hidden_runs else None
    noted = False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or index in run.test_cells:
            continue
        cell["outputs"] = protocol.without_observations(cell.get("outputs", []))
        if tainted_after is not None and index > tainted_after:
            cell.outputs = [] if noted else [nbformat.v4.new_output("stream", name="stdout", text=TAINT_NOTE)]
            noted = True
    for index in sorted(run.test_cells):
        _settle_test_cell(run, index, reference, tainted=tainted_after is not None and index > tainted_after)


def _settle_test_cell(run, index: int, reference: dict[str, list[dict]], tainted: bool) -> None:
    cell = run.nb.cells[index]
    grade_id = protocol.nbgrader_meta(cell).get("grade_id")
    hidden_outputs, hidden_status = run.hidden_runs.get(index, ([], None))
    observed = protocol.observations_in(hidden_outputs) + protocol.observations_in(cell.get("outputs", []))
    cell.source = protocol.strip_hidden(cell.source)
    cell["outputs"] = protocol.without_observations(cell.get("outputs", []))
    visible_error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
    if tainted:
        # the visible part ran after hidden code: its text, even an error's name, is not to be trusted
        cell.outputs = []
        if visible_error is not None:
            cell.outputs.append(error_output("VisibleCheckFailed", "the visible checks of this cell failed "
                                             "(the message is not shown here: run the cell yourself)"))
    else:
        cell.outputs = [_as_stdout(o) for o in cell.get("outputs", []) if o.output_type != "execute_result"]
        for out in cell.outputs:
            if out.output_type == "error":   # no frames: they would show hidden test code
                out.traceback = [f"{out.ename}: {out.evalue}"]
    if index not in run.replies:
        cell.outputs.append(error_output("NotRun", f"not run: {run.reason or run.status}"))
        run.verdicts[grade_id] = 0.0
        return
    hidden_error = any(o.get("output_type") == "error" for o in hidden_outputs)
    finished = run.replies.get(index) == "ok" and visible_error is None and not hidden_error and (
        index not in run.hidden_runs or hidden_status == "ok")
    verdict = judge_cell(reference.get(grade_id, []), observed, finished)
    run.verdicts[grade_id] = float(protocol.nbgrader_meta(cell).get("points") or 0) if verdict.passed else 0.0
    if not verdict.passed and visible_error is None:
        cell.outputs.append(error_output("HiddenTestFailed", verdict.reason))
    elif verdict.passed and tainted:
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                                   text="[grader] every check of this test passed\n"))


def error_output(ename: str, evalue: str):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _as_stdout(out):
    """A graded cell's stderr stream as stdout: nbgrader scores a graded cell with stderr output 0, and a
    student's warning or debug print must not cost the test's points."""
    if out.get("output_type") == "stream" and out.get("name") == "stderr":
        out = nbformat.from_dict(dict(out, name="stdout"))
    return out
