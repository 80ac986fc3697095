"""Fast unit tests of the grading pipeline's parts (no kernel started)."""
import io

import pytest

from autograder.grading import canonical, pipeline


def test_definitions_only_keeps_definitions_and_reports_the_rest():
    source = (
        "import torch\n"
        "EPS = 1e-8\n"
        "torch.equal = lambda *a: True\n"
        "@torch.no_grad()\n"
        "def f(x, dtype=torch.float32):\n    return x\n"
        "print('hi')\n"
        "class M(torch.nn.Module):\n    scale = 2\n    def forward(self, x):\n        return x\n"
        "class Bad:\n    get_ipython().input_transformers_post.clear()\n"
    )
    kept, dropped = canonical.definitions_only(source)
    assert "import torch" in kept and "EPS = 1e-8" in kept and "def f(" in kept and "@torch.no_grad()" in kept
    assert "class M(" in kept
    assert "torch.equal" not in kept and "print(" not in kept and "class Bad" not in kept
    assert [d.split(":")[0] for d in dropped] == ["line 3", "line 7", "line 12"]


def test_definitions_only_rejects_code_hidden_in_defaults_and_decorators():
    for source in ("def f(x=__import__('os').system('true')):\n    pass\n",
                   "@(lambda f: f)\ndef g():\n    pass\n"):
        kept, dropped = canonical.definitions_only(source)
        assert kept == "" and len(dropped) == 1


def test_syntax_errors_pass_through_for_the_student_to_see():
    kept, dropped = canonical.definitions_only("def f(:\n")
    assert kept == "def f(:\n" and "syntax error" in dropped[0]


def test_read_submission_reports_corruption(tmp_path):
    bad = tmp_path / "nb.ipynb"
    for content, fragment in [('{"cells": [', "not valid JSON"), ("[1, 2]", "not a notebook"),
                              ('{"cells": [], "nbformat": 3}', "not a version 4 notebook"),
                              ('{"cells": [{"cell_type": "code", "source": 5}], "nbformat": 4}', "no text source")]:
        bad.write_text(content)
        with pytest.raises(canonical.SubmissionError) as info:
            canonical.read_submission(bad)
        assert info.value.status == "corrupt" and fragment in info.value.reason
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(canonical.SubmissionError, match="UTF-8"):
        canonical.read_submission(bad)


def test_strip_hidden_tests():
    source = '"""doc"""\ncheck(1)\n### BEGIN HIDDEN TESTS\nsecret(2)\n### END HIDDEN TESTS\n'
    stripped = canonical.strip_hidden_tests(source)
    assert "secret" not in stripped and "check(1)" in stripped and "hidden tests run here" in stripped


def test_shards_partition_students():
    students = [f"s{i}" for i in range(50)]
    parts = [{s for s in students if pipeline.in_shard(s, (i, 3))} for i in range(3)]
    assert set().union(*parts) == set(students) and sum(map(len, parts)) == 50
    assert all(parts)


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal_and_lines_in_a_log():
    result = pipeline.NotebookResult("ann", "01_x", "01_x", status="timeout", reason="slow", seconds=1.0)
    tty, log = FakeTTY(), io.StringIO()
    for stream in (tty, log):
        progress = pipeline.Progress(2, stream)
        progress.update(result)
        progress.update(result)
    assert "\r[###############...............] 1/2" in tty.getvalue()
    assert "[##############################] 2/2" in tty.getvalue()
    assert log.getvalue().splitlines()[0] == "graded 1/2 ann 01_x/01_x: timeout (1.0 s) - slow"
