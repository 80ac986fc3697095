"""The closing self-check cell and the progress bars (autograder.kernel.notebook_check)."""
from __future__ import annotations

import json
import random

import nbformat
import pytest
import torch

from autograder.kernel import checks, selfcheck
from autograder.kernel import notebook_check as nc

LESSON = "99_example"


def graded_cell(name: str, points: int, visible: str, hidden: str = "") -> dict:
    source = f'"""{name}: the visible checks."""\n{visible}\nchecks.passed("{name}")\n'
    if hidden:
        source += f"### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n"
    return {"cell_type": "code", "execution_count": None, "id": f"test-{name}", "outputs": [], "source": source,
            "metadata": {"nbgrader": {"grade": True, "grade_id": f"test_{name}", "locked": True, "points": points,
                                      "schema_version": 3, "solution": False, "task": False}}}


def code_cell(source: str, **nbgrader) -> dict:
    meta = {"nbgrader": {"grade": False, "locked": False, "schema_version": 3, "solution": True, "task": False,
                         **nbgrader}} if nbgrader else {}
    return {"cell_type": "code", "execution_count": None, "id": f"c{abs(hash(source)) % 10**8}", "outputs": [],
            "source": source, "metadata": meta}


def write_notebook(folder, cells, name=LESSON):
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = folder / f"{name}.ipynb"
    path.write_text(json.dumps(nb))
    return path


HIDDEN_BOOM = 'raise RuntimeError("the hidden part must not run in a self-check")'
CELLS = [
    graded_cell("double", 2, "checks.expect(double(2) == 4, 'double(2) should be 4')", HIDDEN_BOOM),
    graded_cell("halve", 3, "checks.expect(checks.call(halve, 4) == 2, 'halve(4) should be 2\\nLikely mistake: //')"),
    graded_cell("stub", 1, "checks.call(stub)"),
    graded_cell("missing", 5, "checks.expect(not_defined_yet() == 1, 'never reached')"),
]


def namespace():
    def double(x):
        return 2 * x

    def halve(x):
        return x / 4

    def stub():
        raise NotImplementedError()

    return {"checks": checks, "double": double, "halve": halve, "stub": stub, "torch": torch}


def test_runs_the_visible_part_of_every_test_cell(tmp_path):
    path = write_notebook(tmp_path, [code_cell("x = 1")] + CELLS)
    results = nc.run_visible_checks(LESSON, namespace(), notebook=path)
    assert [(r["exercise"], r["points"], r["passed"]) for r in results] == [
        ("double", 2, True), ("halve", 3, False), ("stub", 1, False), ("missing", 5, False)]
    by_name = {r["exercise"]: r for r in results}
    assert by_name["double"]["message"] is None           # the hidden part (which raises) was cut off
    assert by_name["halve"]["message"] == "halve(4) should be 2\nLikely mistake: //"
    assert "halve is not implemented" not in by_name["halve"]["message"]
    assert by_name["stub"]["message"].startswith("stub is not implemented yet")
    assert "not_defined_yet" in by_name["missing"]["message"] and "run the cells above" in by_name["missing"]["message"]


def test_leaves_the_random_state_and_torch_switches_as_they_were(tmp_path, capsys):
    cell = graded_cell("side_effects", 1, "\n".join([
        "torch.manual_seed(123)", "random.seed(5)", "torch.set_grad_enabled(False)",
        "torch.set_default_dtype(torch.float64)", "drawn = torch.randn(3)"]))
    path = write_notebook(tmp_path, [cell])
    ns = dict(namespace(), random=random)
    torch.manual_seed(0)
    random.seed(0)
    expected_torch, expected_random = torch.randn(4), random.random()
    torch.manual_seed(0)
    random.seed(0)
    results = nc.run_visible_checks(LESSON, ns, notebook=path)
    assert results[0]["passed"], results
    assert torch.equal(torch.randn(4), expected_torch) and random.random() == expected_random
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    assert capsys.readouterr().out == ""                  # "All checks passed" lines stay out of the table


def test_checks_see_the_notebook_namespace(tmp_path):
    """A check may swap a notebook function for a spy: the student's code must see the swap."""
    spy = graded_cell("spied", 1, "\n".join([
        "calls = []", "real = helper", "globals()['helper'] = lambda: calls.append('spy') or real()",
        "try:", "    uses_helper()", "finally:", "    globals()['helper'] = real",
        "checks.expect(calls == ['spy'], f'uses_helper should call helper once, calls: {calls}')"]))
    path = write_notebook(tmp_path, [spy])
    ns = {"checks": checks}
    exec("def helper():\n    return 1\ndef uses_helper():\n    return helper()", ns)
    results = nc.run_visible_checks(LESSON, ns, notebook=path)
    assert results[0]["passed"], results[0]["message"]


def test_table_shows_points_and_first_failing_line():
    results = [{"exercise": "double", "points": 2, "passed": True, "message": None},
               {"exercise": "halve", "points": 3, "passed": False, "message": "halve(4) is 1.0\nLikely mistake: //"},
               {"exercise": "long", "points": 1, "passed": False, "message": "x" * 300}]
    text = nc.format_results(LESSON, results)
    lines = text.splitlines()
    assert lines[0] == f"Visible checks of {LESSON}, run again now on your current code:"
    assert lines[2].split() == ["exercise", "points", "visible", "checks"]
    assert lines[4].split() == ["double", "2", "passed"]
    assert lines[5].split()[:4] == ["halve", "3", "FAILED:", "halve(4)"] and "Likely" not in lines[5]
    assert lines[6].endswith("...") and len(lines[6].split("FAILED: ")[1]) == nc.MESSAGE_WIDTH
    assert "Passed the visible checks of 1 of 3 exercises (2 of 6 points' worth)." in text
    assert selfcheck.NOTE in text                         # hidden tests run at grading
    assert "Details of the failing checks:\nhalve:\n    halve(4) is 1.0\n    Likely mistake: //" in text


def test_finds_the_notebook_from_jupyterlab_or_the_working_folder(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    in_cwd = write_notebook(tmp_path, CELLS)
    renamed = write_notebook(elsewhere, CELLS, name="my copy")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert nc.find_notebook(LESSON) == in_cwd
    monkeypatch.setenv("JPY_SESSION_NAME", str(renamed))
    assert nc.find_notebook(LESSON) == renamed
    monkeypatch.setenv("JPY_SESSION_NAME", str(elsewhere / "gone.ipynb"))
    assert nc.find_notebook(LESSON) == in_cwd
    write_notebook(tmp_path, [code_cell("x = 1")])        # a notebook without test cells does not count
    assert nc.find_notebook(LESSON) is None


def test_self_check_never_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    nc.self_check(LESSON)
    assert "Self-check: cannot find 99_example.ipynb" in capsys.readouterr().out
    write_notebook(tmp_path, [code_cell("x = 1")] + CELLS)
    monkeypatch.setattr(nc, "_user_namespace", namespace)
    nc.self_check(LESSON)
    out = capsys.readouterr().out
    assert "Passed the visible checks of 1 of 4 exercises (2 of 11 points' worth)." in out


def test_progress_outside_a_kernel_just_iterates(capsys):
    assert list(nc.progress(range(5), desc="epochs")) == [0, 1, 2, 3, 4]
    assert list(nc.progress(iter("ab"))) == ["a", "b"]
    assert capsys.readouterr().out == ""


def test_progress_in_a_kernel_shows_only_a_widget_view(monkeypatch):
    shown = []
    monkeypatch.setattr(nc, "_in_widget_kernel", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append((obj, raw)))
    bars = []
    real_bar = nc._Bar
    monkeypatch.setattr(nc, "_Bar", lambda total, desc: bars.append(real_bar(total, desc)) or bars[-1])
    assert list(nc.progress(range(30), desc="epochs")) == list(range(30))
    (bundle, raw), = shown
    assert raw and list(bundle) == [nc.WIDGET_MIME]       # no text/plain: nbval compares nothing here
    assert bundle[nc.WIDGET_MIME]["model_id"] == bars[0].box.model_id
    assert (bars[0].bar.value, bars[0].bar.max, bars[0].bar.bar_style) == (30, 30, "success")
    assert bars[0].label.value == "30/30"
    for i in nc.progress(range(10), desc="steps"):
        if i == 3:
            break
    assert (bars[1].bar.value, bars[1].bar.bar_style) == (3, "warning")   # three steps ran to their end
    assert bars[1].label.value == "3/10 steps (stopped early)"


def test_in_a_real_kernel(tmp_path):
    """The final cell and a progress bar as nbclient (make release, nbval's kernel, the grader) runs them."""
    from nbclient import NotebookClient

    cells = [code_cell("from autograder.kernel import checks\n"
                       "from autograder.kernel.notebook_check import progress, self_check"),
             code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                       grade_id="ex_double"),
             code_cell("def stub():\n    raise NotImplementedError()"),
             code_cell("total = 0\nfor i in progress(range(3), desc='epochs'):\n    total += i\nprint(total)"),
             CELLS[0], CELLS[2],
             code_cell(f"self_check({LESSON!r})")]
    path = write_notebook(tmp_path, cells)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                   allow_errors=True).execute()
    demo, final = nb.cells[3], nb.cells[-1]
    assert [o.output_type for o in demo.outputs] == ["display_data", "stream"]
    assert list(demo.outputs[0].data) == [nc.WIDGET_MIME] and demo.outputs[1].text == "3\n"
    text = "".join(o.get("text", "") for o in final.outputs)
    assert [o.output_type for o in final.outputs] == ["stream"], final.outputs
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert "double 2 passed" in rows and any(r.startswith("stub 1 FAILED: stub is not implemented yet") for r in rows)
    assert "Passed the visible checks of 1 of 2 exercises (2 of 3 points' worth)." in text


@pytest.mark.parametrize("value", ["0"])
def test_progress_can_be_switched_off(monkeypatch, value):
    monkeypatch.setenv("PTE_PROGRESS", value)
    assert nc._in_widget_kernel() is False
