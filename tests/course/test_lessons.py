"""Every lesson follows the house pattern, so students meet the same rhythm everywhere."""
from __future__ import annotations

import re

import nbformat
import pytest

from autograder import course

import coursekit as kit

LESSONS = course.lessons()


TEMPLATE = kit.REPO / "templates" / "NN_topic.ipynb"


def load(lesson):
    """A lesson's source notebook; "NN_topic" is the template new lessons start from."""
    if lesson == "NN_topic":
        return nbformat.read(TEMPLATE, as_version=4)
    return nbformat.read(course.solution_path(lesson), as_version=4)


def test_there_are_lessons():
    assert "01_tensors_and_views" in course.lessons(narrowed=False)


@pytest.mark.parametrize("lesson", LESSONS + ["NN_topic"])
def test_skeleton(lesson):
    nb = load(lesson)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(f"# {lesson[:2]} · ")
    for heading in ("You will be able to", "## Setup", "## Summary", "## Try it yourself"):
        assert heading.lower() in markdown.lower(), f"{lesson} lacks a '{heading}' part"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "torch.manual_seed(" in code, f"{lesson} sets no seed"
    assert "plt." in code or "widgets" in code or "_explorer(" in code, f"{lesson} has no figure or widget"


@pytest.mark.parametrize("lesson", LESSONS + ["NN_topic"])
def test_graded_parts_follow_the_pattern(lesson):
    nb = load(lesson)
    found = kit.exercises(nb)
    assert found, f"{lesson} has no graded exercise"
    index = {id(c): i for i, c in enumerate(nb.cells)}
    for name, entry in found.items():
        assert {"solution", "test"} <= set(entry), f"{lesson}: exercise {name} needs ex_{name} and test_{name}"
        sol, test = entry["solution"], entry["test"]
        assert index[id(sol)] < index[id(test)]
        assert "### BEGIN SOLUTION" in sol.source and "### END SOLUTION" in sol.source
        assert test.source.lstrip().startswith('"""'), f"test_{name} should open with a one-line docstring"
        assert "### BEGIN HIDDEN TESTS" in test.source, f"test_{name} has no hidden tests"
        hidden = test.source.split("### BEGIN HIDDEN TESTS")[1]
        start = f'from autograder.kernel.hidden import HiddenTests\nhidden = HiddenTests("{lesson}", "test_{name}")\n'
        assert start in hidden and ".observe(" in hidden, (
            f"test_{name}: the hidden part must import HiddenTests itself (the release never needs it) and observe "
            f"through HiddenTests({lesson!r}, 'test_{name}')")
        assert "hidden.done()" in hidden, f"test_{name}: the hidden part must end with hidden.done()"
        visible = test.source.split("### BEGIN HIDDEN TESTS")[0]
        assert "checks." in visible, f"test_{name}: visible checks should use the shared helpers"
        assert not re.search(r"^\s*assert\s", test.source, re.M), f"test_{name} uses a bare assert"
        assert test.metadata.nbgrader["locked"] is True
        heading = next(c for c in reversed(nb.cells[: index[id(sol)]]) if c.cell_type == "markdown"
                       and c.source.startswith("### "))
        assert f"({entry['points']} point" in heading.source.splitlines()[0], f"{name}: heading must state its points"


@pytest.mark.parametrize("lesson", LESSONS)
def test_volatile_cells_give_a_reason(lesson):
    """Cells that nbval does not compare say why, off the student's page: in the cell's metadata ``nbval_reason``
    (the course's machinery is no concern of the student's, so no '# nbval:' comment in the code)."""
    for cell in load(lesson).cells:
        tags = cell.get("metadata", {}).get("tags", [])
        assert "# nbval:" not in cell.source, (
            f"{lesson}: cell {cell.get('id')} explains nbval on the student's page: move it to metadata nbval_reason")
        if any(t.startswith("nbval-") for t in tags):
            reason = str(cell.get("metadata", {}).get("nbval_reason", "")).strip()
            assert reason, f"{lesson}: cell {cell.get('id')} is tagged {tags} without a reason (metadata nbval_reason)"


@pytest.mark.parametrize("lesson", LESSONS)
def test_solutions_were_executed(lesson):
    """Stored outputs come from a real run: every code cell ran, in order, without errors."""
    cells = [c for c in load(lesson).cells if c.cell_type == "code"]
    counts = [c.execution_count for c in cells]
    assert None not in counts, f"{lesson}: some cells were never executed; run `make release`"
    assert counts == sorted(counts) and len(set(counts)) == len(counts), f"{lesson}: out-of-order execution"
    errors = [c.get("id") for c in cells if any(o.output_type == "error" for o in c.outputs)
              and "raises-exception" not in c.metadata.get("tags", [])]
    assert not errors, f"{lesson}: cells stored with errors: {errors}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_pitfall_table_names_real_exercises(lesson):
    names = set(kit.exercises(load(lesson)))
    for exercise in kit.load_pitfalls(lesson):
        assert exercise in names, f"tests/course/pitfalls/{lesson}.py names unknown exercise {exercise}"


MARKDOWN_BUDGET = 3000   # words a student reads in one sitting, folded sections left out
FOLDED = re.compile(r"<details>.*?</details>", re.S)
NOT_THEIRS = re.compile(r"cheat[- ]sheet|course(?:'s)? reading|\bthe reading\b", re.I)


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_lesson_reads_in_one_sitting(lesson):
    """At most 3,000 words of markdown outside folded <details> sections."""
    words = sum(len(FOLDED.sub(" ", cell.source).split()) for cell in load(lesson).cells
                if cell.cell_type == "markdown")
    assert words <= MARKDOWN_BUDGET, f"{lesson}: {words} words of markdown outside folded sections"


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_page_names_no_document_students_do_not_have(lesson):
    """Students never get the course's reading or cheat-sheet: the lesson does not send them there."""
    found = [cell.get("id") for cell in load(lesson).cells if NOT_THEIRS.search(cell.source)]
    assert not found, f"{lesson}: cells {found} refer to the reading or the cheat-sheet"
