"""The course's notebook protocol, defined once: what makes a cell an answer or a test, the markers
inside them, the tags the tools act on, lesson ids, where observations travel in a cell's outputs, and the
reference file (its name, format and fields, read and written here only).

Imported by the release (``autograder.course``), the kernel side (checks, self-check, Validate), the
grader (``canonical``, ``runner``, ``judge``, ``reference``), the student edition, the GPU runner and the
tests. Standard library only (``observations`` is too): the GPU runner imports it on a machine that has
nothing but a Python with torch.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.kernel.vocabulary import messages, observations  # standard library only, as this module

# nbgrader's markers, inside an answer cell and inside a test cell. Spelled in two parts: this file ships in
# the student edition, whose leak check refuses any file that holds a marker as it appears in a notebook.
_SOLUTION, _HIDDEN = "SOLUTION", "HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = f"### BEGIN {_SOLUTION}", f"### END {_SOLUTION}"
HIDDEN_BEGIN, HIDDEN_END = f"### BEGIN {_HIDDEN}", f"### END {_HIDDEN}"
MARKERS = (SOLUTION_BEGIN, SOLUTION_END, HIDDEN_BEGIN, HIDDEN_END)
# The hidden part's markers as lines, spaces between the words forgiven (the release and the grader agree).
_BEGIN_LINE = r"^[ \t]*###[ \t]*BEGIN[ \t]+HIDDEN[ \t]+TESTS"
_END_LINE = r"^[ \t]*###[ \t]*END[ \t]+HIDDEN[ \t]+TESTS[ \t]*$"
HIDDEN_START = re.compile(_BEGIN_LINE + r"[^\n]*\n?", re.M)
HIDDEN_STOP = re.compile(_END_LINE, re.M)
# a whole hidden block, from its BEGIN line to its END line
HIDDEN_BLOCK = re.compile(_BEGIN_LINE + r".*?" + _END_LINE, re.S | re.M)
HIDDEN_PLACEHOLDER = "# (hidden tests run here; their code is not shown)"

# lesson (assignment) ids: NN_snake_case_topic
LESSON_ID = re.compile(r"^\d\d_[a-z0-9_]+$")


# grade ids: the answer to exercise NAME is ex_NAME, its test cell test_NAME
ANSWER_PREFIX, TEST_PREFIX = "ex_", "test_"

# cell tags
REQUIRES_CUDA = "requires-cuda"          # runs only where CUDA is; its stored output is the CPU's
RAISES_EXCEPTION = "raises-exception"    # JupyterLab, nbclient and nbval let it raise (release test cells)

# the reference observations the hidden checks are judged against, beside each solution
REFERENCE_FILE = "reference_observations.json"
REFERENCE_FORMAT = 1
# the fields of one reference observation, as the release stores them and the judge reads them
ENTRY_KEYS = ("label", "value", "atol", "rtol", "hint")


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata ({} when it has none, or when what it has is not a mapping)."""
    meta = (cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}
    return meta if isinstance(meta, dict) else {}


def tags(cell) -> list[str]:
    return list((cell.get("metadata", {}) or {}).get("tags", []) or [])


def is_test_cell(cell) -> bool:
    """A graded test cell, as nbgrader and the grader see one: code, graded, not an answer. (The course
    names each one ``test_<exercise>``; :func:`exercise_of` reads that name.)"""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def is_answer_cell(cell) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("solution")) and str(meta.get("grade_id", "")).startswith(ANSWER_PREFIX)


def exercise_of(grade_id: str) -> str:
    """``test_flatten`` and ``ex_flatten`` -> ``flatten``."""
    for prefix in (TEST_PREFIX, ANSWER_PREFIX):
        if grade_id.startswith(prefix):
            return grade_id[len(prefix):]
    return grade_id


def split_hidden(source: str) -> tuple[str, str]:
    """(visible part, hidden part without its markers, plus whatever followed them). A test cell without
    hidden tests is all visible; a BEGIN line without its END hides the rest of the cell."""
    start = HIDDEN_START.search(source)
    if start is None:
        return source, ""
    stop = HIDDEN_STOP.search(source, start.end())
    if stop is None:
        return source[:start.start()], source[start.end():]
    return source[:start.start()], source[start.end():stop.start()] + source[stop.end():]


def strip_hidden(source: str) -> str:
    """A test cell's source as feedback may show it: each hidden block replaced by one line."""
    visible, hidden = split_hidden(source)
    if not hidden:
        return source
    return HIDDEN_BLOCK.sub(HIDDEN_PLACEHOLDER, source) if HIDDEN_BLOCK.search(source) else (
        visible + HIDDEN_PLACEHOLDER + "\n")


# ---------------------------------------------------------------- observations in a cell's outputs

def _observation_mime(output) -> str | None:
    data = output.get("data") if output.get("output_type") == "display_data" else None
    return next((key for key in data if observations.is_mime(key)), None) if isinstance(data, dict) else None


def is_observation(output) -> bool:
    """A display output that carries one hidden check's observation (under an observation MIME type, this
    version's :data:`observations.MIME` or another's)."""
    return _observation_mime(output) is not None


def observations_in(outputs) -> list[messages.Observation | messages.MessageError]:
    """The observations among ``outputs`` (a cell's, in order), each read as a
    :class:`messages.Observation`, or in its place the :class:`messages.MessageError` that says why it is none
    (another format, a missing or mistyped field). Untrusted: from the kernel."""
    found = []
    for out in outputs:
        mime = _observation_mime(out)
        if mime is not None:
            try:
                found.append(messages.Observation.from_display(mime, out["data"][mime]))
            except messages.MessageError as error:
                found.append(error)
    return found


def without_observations(outputs) -> list:
    return [out for out in outputs if not is_observation(out)]


# ---------------------------------------------------------------- the reference file

class ReferenceUnreadable(Exception):
    """A reference file that is missing, or not one of :data:`REFERENCE_FORMAT`."""


@dataclass
class Reference:
    """The reference observations of one lesson: grade id -> its entries (:data:`ENTRY_KEYS` each)."""
    lesson: str
    cells: dict[str, list[dict]] = field(default_factory=dict)

    @staticmethod
    def entries(observed: list) -> list[dict]:
        """The reference entries of one test cell's observations: as :func:`observations_in` read them, or
        payloads as found under this version's :data:`observations.MIME`. The MessageError of the first that
        is malformed."""
        found = []
        for observation in observed:
            if isinstance(observation, dict):
                observation = messages.Observation.from_display(observations.MIME, observation)
            if isinstance(observation, messages.MessageError):
                raise observation
            found.append({key: getattr(observation, key) for key in ENTRY_KEYS})
        return found

    def to_json(self, **extra) -> str:
        """The file's text; ``extra`` fields (the grader's cache key) sit beside the standard ones."""
        return json.dumps({"format": REFERENCE_FORMAT, "lesson": self.lesson, "cells": self.cells, **extra},
                          indent=1, sort_keys=True) + "\n"

    def write(self, path: Path, writer: str = "", **extra) -> None:
        """Write atomically: a reader never sees half a file (``writer`` makes the temporary name one of its
        own, where several processes may write the same file)."""
        path = Path(path)
        temporary = path.with_name(f"{path.name}.{writer}.tmp" if writer else f"{path.name}.tmp")
        temporary.write_text(self.to_json(**extra))
        temporary.replace(path)

    @classmethod
    def read(cls, path: Path) -> Reference:
        path = Path(path)
        if not path.is_file():
            raise ReferenceUnreadable(f"{path} is missing: run `make release` (it records the reference observations)")
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise ReferenceUnreadable(f"{path} is not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != REFERENCE_FORMAT or not isinstance(
                data.get("cells"), dict):
            raise ReferenceUnreadable(f"{path} is not a reference observations file of format {REFERENCE_FORMAT}")
        return cls(str(data.get("lesson") or path.parent.name), data["cells"])
