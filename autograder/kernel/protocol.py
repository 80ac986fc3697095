"""The course's notebook protocol, defined once: what makes a cell an answer or a test, the markers
inside them, the tags the tools act on, and the reference file's name and format.

Imported by the release (``autograder.course``), the kernel side (checks, self-check, Validate), the
grader (``canonical``, ``judge``), the student edition, the GPU runner and the tests. Standard library
only: the GPU runner imports it on a machine that has nothing but a Python with torch.
"""
from __future__ import annotations

import re

# nbgrader's markers, inside an answer cell and inside a test cell. Spelled in two parts: this file ships in
# the student edition, whose leak check refuses any file that holds a marker as it appears in a notebook.
_SOLUTION, _HIDDEN = "SOLUTION", "HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = f"### BEGIN {_SOLUTION}", f"### END {_SOLUTION}"
HIDDEN_BEGIN, HIDDEN_END = f"### BEGIN {_HIDDEN}", f"### END {_HIDDEN}"
MARKERS = (SOLUTION_BEGIN, SOLUTION_END, HIDDEN_BEGIN, HIDDEN_END)
# a whole hidden block, from its BEGIN line to its END line
HIDDEN_BLOCK = re.compile(rf"^[ \t]*{HIDDEN_BEGIN}.*?{HIDDEN_END}[ \t]*$", re.S | re.M)

# grade ids: the answer to exercise NAME is ex_NAME, its test cell test_NAME
ANSWER_PREFIX, TEST_PREFIX = "ex_", "test_"

# cell tags
REQUIRES_CUDA = "requires-cuda"          # runs only where CUDA is; its stored output is the CPU's
RAISES_EXCEPTION = "raises-exception"    # JupyterLab, nbclient and nbval let it raise (release test cells)

# the reference observations the hidden checks are judged against, beside each solution
REFERENCE_FILE = "reference_observations.json"
REFERENCE_FORMAT = 1


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata ({} when it has none)."""
    return (cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}


def tags(cell) -> list[str]:
    return list((cell.get("metadata", {}) or {}).get("tags", []) or [])


def is_test_cell(cell) -> bool:
    """A graded test cell of an exercise (code, graded, grade id ``test_<exercise>``)."""
    meta = nbgrader_meta(cell)
    return (cell.get("cell_type") == "code" and bool(meta.get("grade"))
            and str(meta.get("grade_id", "")).startswith(TEST_PREFIX))


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
    hidden tests is all visible."""
    match = HIDDEN_BLOCK.search(source)
    if match is None:
        return source, ""
    block = match.group(0)
    hidden = block.split("\n", 1)[1] if "\n" in block else ""
    hidden = hidden.rsplit(HIDDEN_END, 1)[0]
    return source[:match.start()], hidden + source[match.end():]
