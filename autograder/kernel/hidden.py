"""The hidden part of a test cell: observations of what the student's code produced, recorded or compared.

The visible checks (:mod:`autograder.kernel.checks`) help a student in JupyterLab; they do not decide a grade.
The grade comes from the hidden part of each test cell, which only a solution notebook holds (the release
strips it)::

    ### BEGIN HIDDEN TESTS
    from autograder.kernel.hidden import HiddenTests
    hidden = HiddenTests("NN_topic", "test_<name>")
    hidden.observe("label", what_the_student_code_returned, hint="the misconception")
    hidden.done()
    ### END HIDDEN TESTS

Where an observation is compared depends on where the kernel runs:

- on the instructor's side (plain ``nbgrader autograde``, Validate on ``solutions/``, nbval) each observation is
  compared in the kernel with the reference observation that ``make release`` stored next to the solution
  (:data:`~autograder.kernel.vocabulary.protocol.REFERENCE_FILE`), with an explanatory message;
- under ``python -m autograder grade`` and ``make release`` (``PTE_OBSERVE=record``) the kernel only records: it
  never sees an expected value, and a trusted process outside the sandbox judges.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from autograder.kernel.checks import CheckFailed, fail
from autograder.kernel.vocabulary import observations as _obs
from autograder.kernel.vocabulary import protocol

__all__ = ["HiddenTests"]


def _find_reference(lesson: str) -> Path | None:
    """The lesson's reference observations on the instructor's side, or ``None``.

    Looked up in ``$PTE_REFERENCE_ROOT`` (a course folder), then from the kernel's working
    folder upwards: the lesson's own folder (Validate, nbval) or a course root holding
    ``solutions/<lesson>/`` (``nbgrader autograde`` runs in ``autograded/<student>/<lesson>``).
    """
    roots = [Path(os.environ["PTE_REFERENCE_ROOT"])] if os.environ.get("PTE_REFERENCE_ROOT") else []
    here = Path.cwd().resolve()
    roots += [here, *here.parents]
    for root in roots:
        for candidate in (root / protocol.REFERENCE_FILE if root.name == lesson else None,
                          root / "solutions" / lesson / protocol.REFERENCE_FILE):
            if candidate is not None and candidate.is_file():
                return candidate
    return None


class HiddenTests:
    """The hidden part of test cell ``test`` of ``lesson``: a sequence of observations of the student's results.

    ``observe`` never computes the answer itself: it takes what the student's code returned
    on the test's seeded inputs. Keep every expected value out of the hidden code.
    """

    def __init__(self, lesson: str, test: str):
        self.lesson, self.test = lesson, test
        self.count = 0
        self.recording = os.environ.get("PTE_OBSERVE") == "record"
        self.reference: list[dict] | None = None
        if not self.recording:
            path = _find_reference(lesson)
            if path is None:
                raise CheckFailed(
                    f"{test}: the hidden tests compare with reference observations that only the instructor's "
                    f"copy of the course holds (solutions/{lesson}/{protocol.REFERENCE_FILE}); run `make release` to "
                    "create them.")
            cells = protocol.Reference.read(path).cells
            if test not in cells:
                raise CheckFailed(f"{test}: no reference observations in {path}: run `make release` again.")
            self.reference = cells[test]

    def observe(self, label: str, value: Any, *, atol: float = 1e-6, rtol: float = 1e-6,
                strides: bool = False, hint: str | None = None) -> None:
        """Record (grading) or compare (instructor side) what the student's code produced."""
        index = self.count
        self.count += 1
        try:
            encoded = _obs.encode(value, strides=strides)
        except _obs.TooLarge as exc:
            encoded = {"type": "too-large", "reason": str(exc)}
        if self.recording:
            from autograder.kernel.vocabulary.messages import Observation

            entry = Observation(test=self.test, index=index, label=label, value=encoded, atol=atol, rtol=rtol,
                                hint=hint)
            try:
                _obs.to_json(entry.display_data()[_obs.MIME])
            except (_obs.TooLarge, ValueError) as exc:
                entry.value = {"type": "too-large", "reason": str(exc)}
            from IPython.display import display
            display(entry.display_data(), raw=True)
            return
        if index >= len(self.reference):
            raise CheckFailed(f"{self.test}: more hidden observations than the reference holds: "
                              "the test changed since `make release`; run it again.")
        ref = self.reference[index]
        if ref["label"] != label:
            raise CheckFailed(f"{self.test}: hidden observation {index + 1} is '{label}' but the reference has "
                              f"'{ref['label']}': run `make release` again.")
        found = _obs.compare(ref, encoded)
        if found:
            fail(f"{label} (hidden test)", found[1], ref.get("hint"))

    def done(self) -> None:
        """End of the hidden part: on the instructor's side, every reference observation was made."""
        if not self.recording and self.count != len(self.reference):
            raise CheckFailed(f"{self.test}: {self.count} hidden observations, the reference holds "
                              f"{len(self.reference)}: run `make release` again.")
