"""No answer stands in a lesson's text: no markdown, summary or demo cell holds a distinctive line of that
lesson's solutions.

What a machine can see of the rule "summaries, demos and helpers near an exercise do not contain its
solution": for every line between the solution markers of a lesson's answer cells, normalized (comments
dropped, spaces collapsed, a leading ``return`` dropped), no *text* cell of the same lesson holds it:
no markdown cell (outside its folded ``<details>`` hints, which may go from the idea to a skeleton) and no
code cell that is neither an answer cell nor a test cell. Lines every PyTorch program shares (imports,
``loss.backward()``, ``optimizer.zero_grad()``, ``return x``, short lines, control keywords) are skipped:
a demo may and should show the technique on its own example; what it must not show is the exercise's
own answer: two distinctive lines of one solution in one cell, the only distinctive line of a solution
that has one, or the whole solution (normalized, joined). A demo that copies the answer with its own
variable names is caught too: two consecutive distinctive lines of a solution, every name but the
attributes and the libraries' replaced by ``_``, standing consecutively in a code cell
(``run_scaler.scale(loss).backward()`` then ``run_scaler.step(run_opt)``).

A code cell that an exercise starts from (the broken code an exercise asks to change) names that exercise's
answer cells in its metadata, ``pte.starting_point_of``: it may share lines with those answers, since it
is the problem, not the answer; it is still compared with every other answer.

One test per lesson (``PTE_LESSONS`` narrows them). ``KNOWN`` lists the lessons whose text still holds an
answer, each with the reason, as strict expected failures: fixing one makes its test pass, and strict
makes that a failure until the entry goes.
"""
from __future__ import annotations

import copy
import io
import keyword
import re
import tokenize

import nbformat
import pytest

from autograder import course
from autograder.kernel.vocabulary import protocol

# Lessons still failing, with the reason; strict: an entry whose lesson passes fails until it is removed.
KNOWN: dict[str, str] = {}

MIN_CHARS = 16          # a normalized line shorter than this is too common to tell an answer by
COMMON = re.compile(
    r"""^(?:
        (?:from\s+\S+\s+)?import\s.*            # imports
      | (?:el)?if\b.*: | else: | try: | finally: | except\b.*: | pass | break | continue
      | (?:return|yield)(?:\s+[\w.]+)?          # return x, return self.total
      | [\w.]*\.(?:backward|zero_grad|step|train|eval|item|detach|clone)\(\)   # loss.backward(), model.eval()
      | with\s+torch\.no_grad\(\):
      | for\s+[\w, ()]+\s+in\s+[\w.]+:          # for xb, yb in loader:
      | for\s+[\w, ()]+\s+in\s+range\([\w.]+\):  # for epoch in range(num_epochs):
      | raise\s+\w+(?:\(\))?
      | def\s.* | class\s.* | @.*
    )$""", re.X)
DETAILS = re.compile(r"<details>.*?</details>", re.S | re.I)


def normalize(line: str) -> str:
    """One line as compared: the comment dropped, runs of spaces collapsed, backticks and a leading
    ``return`` gone (a summary writes the expression, the answer returns it)."""
    code = line.split("  #", 1)[0].split("\t#", 1)[0]
    if code.lstrip().startswith("#"):
        return ""
    code = re.sub(r"\s+", " ", code.replace("`", "")).strip()
    return re.sub(r"^return\s+", "", code)


def distinctive(line: str) -> bool:
    """Worth comparing: long enough and not a line that every PyTorch program shares."""
    return len(line) >= MIN_CHARS and not COMMON.match(line)


def solution_regions(nb) -> list[tuple[str, str]]:
    """``(answer cell id, the code between its solution markers)`` for every answer cell."""
    regions = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not protocol.is_answer_cell(cell):
            continue
        pattern = re.escape(protocol.SOLUTION_BEGIN) + r"\n(.*?)" + re.escape(protocol.SOLUTION_END)
        bodies = re.findall(pattern, cell.source, re.S) or [cell.source]
        regions += [(cell.get("id", "?"), body) for body in bodies]
    return regions


def text_cells(nb) -> list[tuple[str, str]]:
    """``(cell id, its comparable text)`` for every cell a student reads that is not an exercise's own:
    markdown without its folded hints, and code cells that are neither answer nor test cells."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found.append((cell.get("id", "?"), DETAILS.sub("", cell.source)))
        elif cell.cell_type == "code" and not protocol.is_answer_cell(cell) and not protocol.is_test_cell(cell):
            found.append((cell.get("id", "?"), cell.source))
    return [(cid, " ".join(normalize(line) for line in text.splitlines())) for cid, text in found]


def starting_points(nb) -> dict[str, set[str]]:
    """Code cell id -> the answer cells it is the starting point of (``pte.starting_point_of``)."""
    return {cell.get("id", "?"): set(cell.metadata.get("pte", {}).get("starting_point_of", ()))
            for cell in nb.cells if cell.cell_type == "code"}


def answers_in_text(nb) -> list[str]:
    """Every text cell that holds an answer: two distinctive lines of one solution (an answer assembled), the
    one distinctive line of a solution that has only one, or a whole solution.

    A single line of a longer solution may stand in the text: the body teaches the API an exercise needs
    (``scaler.step(optimizer)`` in a list of the scaler's methods), and a demo shows the technique."""
    texts = text_cells(nb)
    starts = starting_points(nb)
    found = []
    for answer_id, body in solution_regions(nb):
        lines = [normalize(line) for line in body.splitlines()]
        whole = " ".join(line for line in lines if line)
        probes = sorted({line for line in lines if distinctive(line)})
        for cid, text in texts:
            if answer_id in starts.get(cid, ()):
                continue
            hits = [probe for probe in probes if probe in text]
            if len(whole) >= MIN_CHARS and whole in text:
                found.append(f"cell {cid} holds the whole solution of answer cell {answer_id}")
            elif hits and len(hits) >= min(2, len(probes)):
                found.append(f"cell {cid} holds {hits} from answer cell {answer_id}")
    return sorted(set(found))


KEEP_NAMES = {"torch", "nn", "F", "np", "random", "math", "self", "True", "False", "None"}


def canonical(line: str) -> str:
    """A normalized line with every name replaced by ``_`` except attributes (after a dot), keywords and the
    libraries' own names: ``run_scaler.step(run_opt)`` and ``scaler.step(optimizer)`` both read ``_.step(_)``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line
    out, previous = [], None
    for token in tokens:
        if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT, tokenize.INDENT,
                          tokenize.DEDENT):
            continue
        renamed = (token.type == tokenize.NAME and not keyword.iskeyword(token.string)
                   and token.string not in KEEP_NAMES and not (previous is not None and previous.string == "."))
        out.append("_" if renamed else token.string)
        previous = token
    return "".join(out)


def renamed_copies(nb) -> list[str]:
    """Code cells holding two consecutive distinctive lines of a solution, names aside."""
    cells = [(c.get("id", "?"), [canonical(line) for line in (normalize(x) for x in c.source.splitlines())
                                 if distinctive(line)])
             for c in nb.cells
             if c.cell_type == "code" and not protocol.is_answer_cell(c) and not protocol.is_test_cell(c)]
    starts = starting_points(nb)
    found = []
    for answer_id, body in solution_regions(nb):
        lines = [canonical(line) for line in (normalize(x) for x in body.splitlines()) if distinctive(line)]
        pairs = {tuple(lines[i:i + 2]) for i in range(len(lines) - 1)}
        for cid, text in cells:
            if answer_id in starts.get(cid, ()):
                continue
            hits = sorted(pair for pair in pairs if any(tuple(text[i:i + 2]) == pair for i in range(len(text) - 1)))
            if hits:
                found.append(f"cell {cid} holds {list(hits[0])}, renamed, from answer cell {answer_id}")
    return found


def _param(lesson: str):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[lesson])] if lesson in KNOWN else []
    return pytest.param(lesson, marks=marks, id=lesson)


@pytest.mark.parametrize("lesson", [_param(lesson) for lesson in course.lessons()])
def test_no_solution_line_stands_in_the_text(lesson):
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    found = answers_in_text(nb) + renamed_copies(nb)
    assert not found, (f"{lesson}: the lesson's text holds its own answers (move them out of the demo or "
                       "summary, or show the technique on another example):\n  " + "\n  ".join(found))


def _cell(kind: str, source: str, **nbgrader) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = {"grade_id": nbgrader.pop("grade_id", "x"), "points": nbgrader.pop("points", 0),
                                     "schema_version": 3, **nbgrader}
    return cell


def _lesson(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


ANSWER = _cell("code", "def f(x, weight, bias):\n    ### BEGIN SOLUTION\n    import torch\n"
                       "    return x @ weight.T + bias  # the layer\n    ### END SOLUTION\n",
               solution=True, grade=False, locked=False, grade_id="ex_f")


def test_a_summary_that_states_the_answer_is_caught():
    nb = _lesson(ANSWER, _cell("markdown", "## Summary\n\n- a linear layer is `x @ weight.T  + bias`."))
    assert answers_in_text(nb) and "x @ weight.T + bias" in answers_in_text(nb)[0]


def test_a_demo_that_holds_the_answer_line_is_caught():
    nb = _lesson(ANSWER, _cell("code", "out = x @ weight.T + bias\nprint(out)"))
    assert answers_in_text(nb)


TWO_LINES = _cell("code", "def g(loss, opt, scaler):\n    ### BEGIN SOLUTION\n    scaler.scale(loss).backward()\n"
                          "    scaler.step(opt)\n    scaler.update()\n    ### END SOLUTION\n",
                  solution=True, grade=False, locked=False, grade_id="ex_g")


def test_an_assembled_answer_is_caught_and_one_taught_api_line_is_not():
    taught = _cell("markdown", "- `scaler.scale(loss).backward()` multiplies every gradient by S;")
    assembled = _cell("code", "scaler.scale(loss).backward()\nscaler.step(opt)  # then the step")
    assert answers_in_text(_lesson(TWO_LINES, taught)) == []
    assert answers_in_text(_lesson(TWO_LINES, assembled))


def test_hints_test_cells_and_shared_lines_are_not_answers():
    test = _cell("code", "assert torch.equal(f(x, w, b), x @ weight.T + bias)", solution=False, grade=True,
                 locked=True, grade_id="test_f", points=1)
    hint = _cell("markdown", "<details><summary>Hint</summary>\n\n`x @ weight.T + bias`\n</details>\nimport torch")
    assert answers_in_text(_lesson(ANSWER, test, hint)) == []


def test_the_same_technique_on_another_example_passes():
    nb = _lesson(ANSWER, _cell("code", "y = inputs @ layer.weight.T + layer.bias"))
    assert answers_in_text(nb) == []


def test_a_renamed_copy_of_the_answer_in_a_demo_is_caught():
    demo = _cell("code", "run_scaler.scale(loss).backward()\nrun_scaler.step(run_opt)\nrun_scaler.update()")
    one_line = _cell("code", "probe_scaler.scale(loss).backward()\nnorm = total_norm(grads)")
    assert renamed_copies(_lesson(TWO_LINES, demo))
    assert renamed_copies(_lesson(TWO_LINES, one_line)) == []


def test_the_code_an_exercise_starts_from_may_share_only_that_exercise_s_lines():
    """A broken function the exercise asks to change shares lines with its answer; marked as that exercise's
    starting point it passes, and it is still caught holding another exercise's answer."""
    given = _cell("code", "scaler.scale(loss).backward()\nscaler.step(opt)\nprint('no update: the scale never moves')")
    given.metadata["pte"] = {"starting_point_of": ["two"]}
    two, one = copy.deepcopy(TWO_LINES), copy.deepcopy(ANSWER)
    two["id"], one["id"] = "two", "one"
    assert answers_in_text(_lesson(two, given)) == [] and renamed_copies(_lesson(two, given)) == []
    other = _cell("code", "y = x @ weight.T + bias\nscaler.step(opt)")
    other.metadata["pte"] = {"starting_point_of": ["two"]}
    assert answers_in_text(_lesson(one, two, other))
