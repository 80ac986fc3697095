"""Fast unit tests of the grading pipeline's parts (no kernel started)."""
import io
import json
import os

import nbformat
import pytest

from autograder.grading import canonical, pipeline, settings
from autograder.grading.settings import Settings


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    for index, (kind, source, meta) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell["id"] = f"c{index}"
        if meta:
            cell.metadata["nbgrader"] = dict(meta)
        nb.cells.append(cell)
    return nb


ANSWER = {"grade_id": "ex_f", "solution": True, "grade": False, "locked": False}
TEST = {"grade_id": "test_f", "solution": False, "grade": True, "locked": True, "points": 2}
RELEASE = _nb(("code", "import torch\nfrom autograder.kernel import checks", None),
              ("code", "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()", ANSWER),
              ("code", '"""f works."""\nchecks.expect(f(1) == 2, "f")', TEST))
SOURCES = {"test_f": '"""f works."""\nchecks.expect(f(1) == 2, "f")\n'
                     '### BEGIN HIDDEN TESTS\nsecret()\n### END HIDDEN TESTS'}


def test_student_code_runs_as_written_and_tests_come_from_the_gradebook():
    honest = ("SCALE = 1 / math.sqrt(2)\nH, W = 8, 8\nsquare = lambda v: v * v\nTOTAL = 0\nTOTAL += 1\n"
              "try:\n    import scipy\nexcept ImportError:\n    scipy = None\n"
              "def f(x):\n    return [v for v in (x, x)][0] * 2")
    submitted = _nb(("code", "import torch\nfrom autograder.kernel import checks", None),
                    ("code", honest, ANSWER), ("code", "def helper():\n    return 3\nprint(helper())", None),
                    ("code", '"""f works."""\nchecks.expect(f(1) == 2, "f")', TEST))
    submitted.cells[2]["id"] = "added-by-student"
    built = canonical.build(RELEASE, submitted, SOURCES)
    sources = [c.source for c in built.nb.cells]
    assert sources[1] == honest and "print(helper())" in sources[2]
    assert "secret()" in sources[3], "the test cell must be the gradebook's, hidden tests included"
    assert built.findings == [] and built.notes == []


def test_a_rewritten_answer_is_never_overwritten_by_the_stub():
    submitted = _nb(("code", "import torch\nfrom autograder.kernel import checks", None),
                    ("code", "def f(x):\n    return 2 * x", None),
                    ("code", '"""f works."""\nchecks.expect(f(1) == 2, "f")', TEST))
    built = canonical.build(RELEASE, submitted, SOURCES)
    assert [c.source for c in built.nb.cells][1] == "def f(x):\n    return 2 * x"
    assert not any("NotImplementedError" in c.source for c in built.nb.cells)
    assert any("ex_f" in note and "missing" in note for note in built.notes)


def test_setup_edits_run_and_are_reported():
    submitted = _nb(("code", "import torch\nimport math\nfrom autograder.kernel import checks", None),
                    ("code", "def f(x):\n    return 2 * x", ANSWER),
                    ("code", '"""f works."""\nchecks.expect(f(1) == 2, "f")', TEST))
    built = canonical.build(RELEASE, submitted, SOURCES)
    assert "import math" in built.nb.cells[0].source
    assert any("'c0' was edited" in note for note in built.notes)


def test_tampering_with_test_cells_is_found():
    edited = _nb(("code", "def f(x):\n    return 2 * x", ANSWER), ("code", "pass", TEST))
    built = canonical.build(RELEASE, edited, SOURCES)
    assert "secret()" in built.nb.cells[1].source and any("edited" in f for f in built.findings)
    deleted = canonical.build(RELEASE, _nb(("code", "def f(x):\n    return 2 * x", ANSWER)), SOURCES)
    assert deleted.deleted_tests == {"test_f"}
    renamed = canonical.build(RELEASE, _nb(("code", "pass", dict(TEST, grade_id="test_g"))), SOURCES)
    assert any("unknown grade id" in f for f in renamed.findings)
    assert "nbgrader" not in renamed.nb.cells[0].metadata


def test_answer_metadata_comes_from_the_release():
    cheeky = _nb(("code", "def f(x):\n    return 2 * x", dict(ANSWER, grade=True, points=100)),
                 ("code", '"""f works."""\nchecks.expect(f(1) == 2, "f")', TEST))
    built = canonical.build(RELEASE, cheeky, SOURCES)
    assert built.nb.cells[0].metadata["nbgrader"] == ANSWER


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


def test_refusing_to_grade_without_bubblewrap(monkeypatch, tmp_path):
    from autograder.grading import sandbox

    monkeypatch.setattr(sandbox, "sandbox_available", lambda: False)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    monkeypatch.setattr(pipeline, "course_layout", lambda coursedir: {})
    monkeypatch.setattr(pipeline, "discover", lambda *a: [])
    with pytest.raises(pipeline.UsageError, match="--sandbox none"):
        pipeline.grade(tmp_path)


def test_cpu_sets_share_the_cores(monkeypatch):
    monkeypatch.setattr(pipeline.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert pipeline.cpu_sets(2) == ["0,1", "2,3"]
    assert pipeline.cpu_sets(4) == ["0", "1", "2", "3"]
    assert pipeline.cpu_sets(6) == ["0", "1", "2", "3", "0", "1"]


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


# ---------------------------------------------------------------- the grading host's reference

def _entry(label, value, atol=1e-6):
    return {"label": label, "value": {"type": "float", "value": value}, "atol": atol, "rtol": 0.0, "hint": None}


def test_reference_differences_name_the_test_cell_and_the_observation():
    from autograder.grading import reference

    stored = {"test_a": [_entry("a1", 1.0), _entry("a2", 2.0)], "test_b": [_entry("b1", 3.0)]}
    host = {"test_a": [_entry("a1", 1.0 + 1e-9), _entry("a2", 2.5)], "test_b": [_entry("b1", 3.0)]}
    assert reference.differences(stored, stored) == []
    found = reference.differences(stored, host)
    assert [(d["test"], d["index"], d["label"]) for d in found] == [("test_a", 2, "a2")]
    host["test_c"] = [_entry("c1", 0.0)]
    host["test_b"].append(_entry("b2", 0.0))
    problems = {(d["test"], d["problem"]) for d in reference.differences(stored, host)}
    assert ("test_c", "only on this host") in problems
    assert ("test_b", "2 observations on this host, 1 stored") in problems


def test_reference_cache_key_follows_what_decides_the_numbers(tmp_path, monkeypatch):
    from autograder.grading import reference

    solution = tmp_path / "lesson.ipynb"
    solution.write_text("{}")
    for name in pipeline.sandbox.CPU_DISPATCH_ENV:
        monkeypatch.delenv(name, raising=False)
    key = reference.cache_key([solution], threads=1)
    assert reference.cache_key([solution], threads=1) == key
    assert reference.cache_key([solution], threads=2) != key
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert reference.cache_key([solution], threads=1) != key
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    solution.write_text('{"changed": 1}')
    assert reference.cache_key([solution], threads=1) != key


def test_both_graders_pin_the_same_thread_count(monkeypatch):
    """nbgrader_config.py sets the threads plain nbgrader's kernels inherit; the grading command reads the same."""
    import runpy

    from autograder import course
    from traitlets.config import Config

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("MKL_NUM_THREADS", "7")
    config = Config()
    runpy.run_path(str(course.REPO_ROOT / "nbgrader_config.py"), init_globals={"get_config": lambda: config})
    threads = Settings.resolve(course.REPO_ROOT, pipeline.load_coursedir(course.REPO_ROOT).config).threads
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == str(threads) == "1"


def test_kernels_get_the_graders_cpu_dispatch_settings(monkeypatch, tmp_path):
    from autograder.grading import sandbox

    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    env = sandbox.kernel_env(tmp_path, 1)
    assert env["ATEN_CPU_CAPABILITY"] == "default" and "MKL_ENABLE_INSTRUCTIONS" not in env


def test_a_value_the_judge_cannot_take_fails_only_its_cell():
    """A forged observation with a huge integer (float() overflows) is that test cell's failure, not a crash."""
    from autograder.grading import judge

    reference = [{"label": "x", "value": {"type": "float", "value": 1.0}, "atol": 1e-6, "rtol": 0.0}]
    for forged in ({"type": "float", "value": 10**400}, {"type": "tensor", "dtype": "torch.float32", "shape": [1],
                                                          "values": [10**400]}, {"type": "float"}, [[[]]]):
        verdict = judge.judge_cell(reference, [{"value": forged}], finished=True)
        assert not verdict.passed and "malformed" in verdict.reason or "wrong" in verdict.reason, verdict


def test_a_notebook_with_too_many_cells_is_refused(tmp_path):
    path = tmp_path / "big.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass") for _ in range(canonical.MAX_CELLS + 1)])
    nbformat.write(nb, path)
    with pytest.raises(canonical.SubmissionError) as found:
        canonical.read_submission(path)
    assert found.value.status == "refused" and "cells" in found.value.reason


def test_recording_batches_overlap_the_run_and_leave_a_small_tail():
    """nbgrader records an assignment that is all in, any BATCH students, and at the end whatever waits."""
    from types import SimpleNamespace

    engine = SimpleNamespace(plan=SimpleNamespace(settings=SimpleNamespace(jobs=2)),
                             unsettled={"a": 5, "b": 10}, waiting={"a": ["s1", "s2"]})

    def batch():
        return pipeline.Engine.next_batch(engine)

    assert batch() is None, "two graded and fifteen to go: wait for more"
    engine.waiting["a"] = [f"s{i}" for i in range(pipeline.BATCH)]
    assert batch() == ("a", [f"s{i}" for i in range(pipeline.BATCH)])
    assert engine.waiting["a"] == []
    engine.unsettled, engine.waiting = {"a": 0, "b": 10}, {"a": ["s9"], "b": ["t1"]}
    assert batch() == ("a", ["s9"]), "an assignment whose submissions are all in is recorded at once"
    assert batch() is None
    engine.unsettled["b"] = 2   # every submission left is running: nothing later can join the batch
    assert batch() == ("b", ["t1"])
    assert batch() is None


def test_the_reference_key_does_not_import_torch():
    """A grading worker computes the key of each reference: importing torch for it cost 1.4 s each."""
    import subprocess
    import sys

    from autograder import course

    probe = ("import sys; from pathlib import Path; from autograder.grading import reference; "
             f"reference.cache_key([Path({str(course.solution_path('01_tensors_and_views'))!r})], 1); "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_retry_policy_confirms_a_timeout_only_beside_others():
    timeout = [pipeline.NotebookResult("s", "a", "n", status="timeout")]
    graded = [pipeline.NotebookResult("s", "a", "n", status="graded")]
    assert pipeline.rerun_alone(timeout, jobs=2, graded_together=3)
    assert not pipeline.rerun_alone(timeout, jobs=1, graded_together=3)
    assert not pipeline.rerun_alone(timeout, jobs=2, graded_together=1)
    assert not pipeline.rerun_alone(graded, jobs=2, graded_together=3)


def _course_with_config(tmp_path, config: str):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n" + config)
    (tmp_path / "submitted").mkdir()
    return tmp_path


def test_settings_come_from_the_course_config_then_the_command_line(tmp_path):
    """Defaults < nbgrader_config.py (Execute.timeout, PTEGrading.*) < the command line."""
    root = _course_with_config(tmp_path, "c.Execute.timeout = 7\nc.PTEGrading.kernel_threads = 3\n"
                                         "c.PTEGrading.memory_mb = 1024\n")
    config = pipeline.load_coursedir(root).config
    found = Settings.resolve(root, config)
    assert (found.cell_timeout_s, found.threads, found.memory_mb, found.output_mb) == (7.0, 3, 1024, 2.0)
    given = Settings.resolve(root, config, {"memory_mb": 2000, "cell_timeout_s": None, "threads": 2})
    assert (given.cell_timeout_s, given.threads, given.memory_mb) == (7.0, 2, 2000)
    bare = Settings.resolve(_course_with_config(tmp_path / "bare", ""),
                            pipeline.load_coursedir(tmp_path / "bare").config)
    assert bare.cell_timeout_s == settings.nbgrader_cell_timeout() == 30.0   # plain nbgrader's own default
    with pytest.raises(ValueError, match="PTEGrading.memory"):
        Settings.resolve(root, {"PTEGrading": {"memory": 1}})


def test_the_grading_command_runs_kernels_with_what_the_config_says(tmp_path, monkeypatch):
    """Not only does the config say it: the plan the command executes carries it into every job's limits."""
    root = _course_with_config(tmp_path, "c.Execute.timeout = 7\nc.PTEGrading.kernel_threads = 3\n")
    monkeypatch.setenv("PTE_SCRATCH", str(tmp_path))
    run = pipeline.plan(root, {"sandbox": "none", "memory_mb": 1500}, pipeline.Progress(0, io.StringIO()))
    run.layout["01_x"] = {"notebooks": {"01_x": 10.0}, "tests": {"01_x": {}}}
    job = run.job("ann", "01_x")
    assert (job.limits.cell_timeout_s, job.limits.threads, job.limits.memory_mb) == (7.0, 3, 1500)
    assert job.limits.timeout_s == settings.default("timeout_s")
    capped = pipeline.plan(root, {"sandbox": "none", "timeout_s": 5}, pipeline.Progress(0, io.StringIO()))
    assert capped.limits.cell_timeout_s == 5   # a cell never outlives its notebook


def test_phase_two_is_nbgraders_own_autograde_with_only_execution_swapped(tmp_path):
    from nbgrader.converters import Autograde

    from autograder import course
    from autograder.grading import phase2

    default = list(Autograde.class_traits()["autograde_preprocessors"].default())
    ours = phase2.autograde_preprocessors(course.REPO_ROOT)
    assert len(ours) == len(default) and ours[0] is phase2.LoadStaged
    assert ours[1:] == default[1:] and any(step.__name__ == "IgnorePattern" for step in ours)
    custom = _course_with_config(tmp_path, "from nbgrader.preprocessors import Execute, LimitOutput\n"
                                           "c.Autograde.autograde_preprocessors = [LimitOutput, Execute]\n")
    assert [s.__name__ for s in phase2.autograde_preprocessors(custom)] == ["LimitOutput", "LoadStaged"]


def test_every_status_is_one_enum_member():
    from autograder.grading.status import Status

    result = pipeline.NotebookResult("s", "a", "n", status="memory-limit")
    assert result.status is Status.MEMORY_LIMIT and json.dumps(result.status) == '"memory-limit"'
    with pytest.raises(ValueError):
        pipeline.NotebookResult("s", "a", "n", status="fine")
