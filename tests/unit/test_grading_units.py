"""Fast unit tests of the grading pipeline's parts (no kernel started)."""
import io
import json
import os
import shutil
import tempfile

import nbformat
import pytest

from autograder.grading import pipeline
from autograder.grading.intake import canonical
from autograder.grading.isolate import sandbox
from autograder.grading.plan import job as jobs
from autograder.grading.plan import planning, settings, shards
from autograder.grading.plan.settings import Settings
from autograder.grading.record import recording
from autograder.grading.report import reporting
from autograder.grading.run import engine, runner, worker
from autograder.kernel.vocabulary import protocol
from autograder.kernel.vocabulary.messages import Observation


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
    assert any("'test_f' was deleted" in f for f in deleted.findings)
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
    from autograder.grading.isolate import sandbox

    monkeypatch.setattr(sandbox, "sandbox_available", lambda: False)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    monkeypatch.setattr(planning, "course_layout", lambda coursedir: {})
    monkeypatch.setattr(planning, "discover", lambda *a: [])
    with pytest.raises(pipeline.UsageError, match="--sandbox none"):
        pipeline.grade(tmp_path)


def test_cpu_sets_share_the_cores(monkeypatch):
    monkeypatch.setattr(engine.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert engine.cpu_sets(2) == ["0,1", "2,3"]
    assert engine.cpu_sets(4) == ["0", "1", "2", "3"]
    assert engine.cpu_sets(6) == ["0", "1", "2", "3", "0", "1"]


def test_strip_hidden_tests():
    source = '"""doc"""\ncheck(1)\n### BEGIN HIDDEN TESTS\nsecret(2)\n### END HIDDEN TESTS\n'
    stripped = protocol.strip_hidden(source)
    assert "secret" not in stripped and "check(1)" in stripped and "hidden tests run here" in stripped


def test_shards_partition_students():
    students = [f"s{i}" for i in range(50)]
    parts = [{s for s in students if shards.in_shard(s, (i, 3))} for i in range(3)]
    assert set().union(*parts) == set(students) and sum(map(len, parts)) == 50
    assert all(parts)


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal_and_lines_in_a_log():
    result = worker.NotebookResult("ann", "01_x", "01_x", status="timeout", reason="slow", seconds=1.0)
    tty, log = FakeTTY(), io.StringIO()
    for stream in (tty, log):
        progress = reporting.Progress(2, stream)
        progress.update(result)
        progress.update(result)
    assert "\r[###############...............] 1/2" in tty.getvalue()
    assert "[##############################] 2/2" in tty.getvalue()
    assert log.getvalue().splitlines()[0] == "graded 1/2 ann 01_x/01_x: timeout (1.0 s) - slow"


# ---------------------------------------------------------------- the grading host's reference

def _entry(label, value, atol=1e-6):
    return {"label": label, "value": {"type": "float", "value": value}, "atol": atol, "rtol": 0.0, "hint": None}


def test_reference_differences_name_the_test_cell_and_the_observation():
    from autograder.grading.run import reference

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
    from autograder.grading.run import reference

    solution = tmp_path / "lesson.ipynb"
    solution.write_text("{}")
    for name in sandbox.CPU_DISPATCH_ENV:
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

    from traitlets.config import Config

    from autograder import course

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("MKL_NUM_THREADS", "7")
    config = Config()
    runpy.run_path(str(course.REPO_ROOT / "nbgrader_config.py"), init_globals={"get_config": lambda: config})
    threads = Settings.resolve(course.REPO_ROOT, planning.load_coursedir(course.REPO_ROOT).config).threads
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == str(threads) == "1"


def test_kernels_get_the_graders_cpu_dispatch_settings(monkeypatch, tmp_path):
    from autograder.grading.isolate import sandbox

    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    env = sandbox.kernel_env(tmp_path, 1)
    assert env["ATEN_CPU_CAPABILITY"] == "default" and "MKL_ENABLE_INSTRUCTIONS" not in env


def test_a_value_the_judge_cannot_take_fails_only_its_cell():
    """A forged observation with a huge integer (float() overflows) is that test cell's failure, not a crash."""
    from autograder.grading.judging import judge

    reference = [{"label": "x", "value": {"type": "float", "value": 1.0}, "atol": 1e-6, "rtol": 0.0}]
    for forged in ({"type": "float", "value": 10**400}, {"type": "tensor", "dtype": "torch.float32", "shape": [1],
                                                          "values": [10**400]}, {"type": "float"}, [[[]]]):
        verdict = judge.judge_cell(reference, [Observation("test_x", 0, "x", forged, 0.0, 0.0, None)], finished=True)
        assert not verdict.passed and "malformed" in verdict.reason or "wrong" in verdict.reason, verdict


def test_a_notebook_with_too_many_cells_is_refused(tmp_path):
    path = tmp_path / "big.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass") for _ in range(settings.MAX_CELLS + 1)])
    nbformat.write(nb, path)
    with pytest.raises(canonical.SubmissionError) as found:
        canonical.read_submission(path)
    assert found.value.status == "refused" and "cells" in found.value.reason


def test_recording_batches_overlap_the_run_and_leave_a_small_tail():
    """nbgrader records an assignment that is all in, any BATCH students, and at the end whatever waits."""
    unsettled, waiting = {"a": 5, "b": 10}, {"a": ["s1", "s2"]}

    def batch():
        return recording.next_batch(waiting, unsettled, jobs=2)

    assert batch() is None, "two graded and fifteen to go: wait for more"
    waiting["a"] = [f"s{i}" for i in range(settings.RECORD_BATCH)]
    assert batch() == ("a", [f"s{i}" for i in range(settings.RECORD_BATCH)])
    assert waiting["a"] == []
    unsettled.update({"a": 0, "b": settings.RECORD_BATCH + 3})
    waiting.update({"a": ["s9"], "b": ["t1"]})
    assert batch() == ("a", ["s9"]), "an assignment whose submissions are all in is recorded at once"
    assert batch() is None, "far from the end: one waiting student is not a batch"
    unsettled["b"] = settings.RECORD_BATCH + 2   # near the end: what waits goes as soon as the recorder is free
    assert batch() == ("b", ["t1"])
    assert batch() is None
    waiting["b"] = ["t2", "t3"]
    unsettled["b"] = 2
    assert batch() == ("b", ["t2", "t3"])


def test_the_recorder_compiles_each_template_once_and_an_edited_one_again(tmp_path, monkeypatch):
    """The recording process reuses compiled feedback templates across batches (each batch's exporter is new),
    and never a stale one: Jinja checks the cached code against the template's source."""
    from nbconvert.exporters.templateexporter import TemplateExporter

    from autograder.grading import private_apis

    entry = private_apis.CREATE_ENVIRONMENT   # put back as it was once the test ends
    monkeypatch.setattr(TemplateExporter, entry.name, private_apis.get(entry))
    cache = recording.compile_templates_once()
    folder = tmp_path / "templates" / "plain"
    folder.mkdir(parents=True)
    (folder / "conf.json").write_text('{"base_template": "base", "mimetypes": {"text/plain": true}}')
    template = folder / "index.txt.j2"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("hello")])

    def render() -> str:
        exporter = TemplateExporter(extra_template_basedirs=[str(tmp_path / "templates")], template_name="plain",
                                    template_file="index.txt.j2")
        exporter.template_extension = ".j2"
        return exporter.from_notebook_node(nb)[0]

    template.write_text("first {{ nb.cells | length }}")
    assert render() == "first 1"
    assert cache.compiled, "nothing was cached"
    entries = len(cache.compiled)
    assert render() == "first 1" and len(cache.compiled) == entries, "the same template was compiled again"
    template.write_text("second {{ nb.cells | length }}")
    assert render() == "second 1", "an edited template must not render from the cache"


def test_a_worker_starts_without_nbgrader():
    """A worker's initializer is unpickled in the worker: in the engine's module it imported the engine, the
    recorder's side and nbgrader there (1.4 s in every worker, before its warm template could start)."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([worker.__name__, runner.__name__])
    workers = engine.Workers(1, context, ["0"])
    try:
        imported = workers.pool.schedule(eval, args=(
            "sorted(m for m in __import__('sys').modules if m.split('.')[0] == 'nbgrader' or m in "
            "('autograder.grading.run.engine', 'autograder.grading.record.recording'))",))
        assert imported.result(timeout=60) == []
    finally:
        workers.shutdown()


def test_a_dead_worker_costs_only_its_own_task_and_a_stuck_one_is_stopped(tmp_path):
    """The pool survives a worker that dies: the task beside it finishes, the dead one's task alone fails
    (ProcessExpired), a new worker takes the next task, and every CPU slot comes back. A task past its timeout
    has its worker stopped (the process is gone) and fails with TimeoutError."""
    import concurrent.futures as futures
    import multiprocessing

    import pebble
    import psutil

    import poolkit

    workers = engine.Workers(2, multiprocessing.get_context("forkserver"), ["0", "1"])
    try:
        beside = workers.submit(poolkit.run, {"outlive": str(tmp_path / "dead")})   # runs while the other dies
        dies = workers.submit(poolkit.run, {"exit": 9, "pid_file": str(tmp_path / "dead")})
        assert workers.free_slots() == 0
        with pytest.raises(pebble.ProcessExpired):
            dies.result(timeout=60)
        assert beside.result(timeout=60)["slot"] == "0", "the task beside a dead worker failed with it"
        for future in (beside, dies):
            workers.finished(future)
        assert sorted(workers.free) == ["0", "1"], "a CPU slot was lost with the dead worker"
        stuck = workers.submit(poolkit.run, {"sleep": 600, "pid_file": str(tmp_path / "pid")}, timeout=2)
        with pytest.raises(futures.TimeoutError):
            stuck.result(timeout=60)
        pid = int((tmp_path / "pid").read_text())
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, \
            "the stuck task's worker still runs"
        workers.finished(stuck)
        assert workers.submit(poolkit.run, {}).result(timeout=60)["pid"] != pid
    finally:
        workers.shutdown()


def test_tasks_on_a_pool_that_stopped_end_as_if_their_worker_died(monkeypatch):
    """pebble stops a pool whose worker dies while no task runs, and its unfinished tasks would never end: the
    engine ends each as a dead worker's (graded again alone) and starts a new pool."""
    import concurrent.futures as futures

    import pebble

    class Stopped:
        replaced = 0

        def runs(self):
            return self.replaced > 0

        def replace(self):
            self.replaced += 1

        def finished(self, future):
            pass

    monkeypatch.setattr(engine, "POOL_CHECK_S", 0.05)
    fake = object.__new__(engine.Engine)
    fake.pool, fake.recording = Stopped(), None
    stuck = futures.Future()
    stuck.set_running_or_notify_cancel()
    assert fake.wait_any({stuck: None}) == {stuck}
    assert isinstance(stuck.exception(), pebble.ProcessExpired) and fake.pool.replaced == 1


def test_the_reference_key_does_not_import_torch():
    """A grading worker computes the key of each reference: importing torch for it cost 1.4 s each."""
    import subprocess
    import sys

    from autograder import course

    probe = ("import sys; from pathlib import Path; from autograder.grading.run import reference; "
             f"reference.cache_key([Path({str(course.solution_path('01_tensors_and_views'))!r})], 1); "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_retry_policy_confirms_a_timeout_only_beside_others():
    timeout = [worker.NotebookResult("s", "a", "n", status="timeout")]
    graded = [worker.NotebookResult("s", "a", "n", status="graded")]
    assert engine.rerun_alone(timeout, jobs=2, graded_together=3)
    assert not engine.rerun_alone(timeout, jobs=1, graded_together=3)
    assert not engine.rerun_alone(timeout, jobs=2, graded_together=1)
    assert not engine.rerun_alone(graded, jobs=2, graded_together=3)


def _course_with_config(tmp_path, config: str):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n" + config)
    (tmp_path / "submitted").mkdir()
    return tmp_path


def test_settings_come_from_the_course_config_then_the_command_line(tmp_path):
    """Defaults < nbgrader_config.py (Execute.timeout, PTEGrading.*) < the command line."""
    root = _course_with_config(tmp_path, "c.Execute.timeout = 7\nc.PTEGrading.kernel_threads = 3\n"
                                         "c.PTEGrading.memory_mb = 1024\n")
    config = planning.load_coursedir(root).config
    found = Settings.resolve(root, config)
    assert (found.cell_timeout_s, found.threads, found.memory_mb, found.output_mb) == (7.0, 3, 1024, 2.0)
    given = Settings.resolve(root, config, {"memory_mb": 2000, "cell_timeout_s": None, "threads": 2})
    assert (given.cell_timeout_s, given.threads, given.memory_mb) == (7.0, 2, 2000)
    bare = Settings.resolve(_course_with_config(tmp_path / "bare", ""),
                            planning.load_coursedir(tmp_path / "bare").config)
    assert bare.cell_timeout_s == settings.nbgrader_cell_timeout() == 30.0   # plain nbgrader's own default
    with pytest.raises(ValueError, match="PTEGrading.memory"):
        Settings.resolve(root, {"PTEGrading": {"memory": 1}})
    with pytest.raises(ValueError, match=r"c\.PTEGrading\.memory_mb = '2048', but it must be an int"):
        Settings.resolve(root, {"PTEGrading": {"memory_mb": "2048"}})


def test_the_grading_command_runs_kernels_with_what_the_config_says(tmp_path, monkeypatch, request):
    """Not only does the config say it: the plan the command executes carries it into every job's limits."""
    root = _course_with_config(tmp_path, "c.Execute.timeout = 7\nc.PTEGrading.kernel_threads = 3\n")
    scratch = tempfile.mkdtemp(prefix="pte-units-")   # short: a kernel's sockets would lie under it
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    monkeypatch.setenv("PTE_SCRATCH", scratch)
    run = planning.plan(root, {"sandbox": "none", "memory_mb": 1500}, reporting.Progress(0, io.StringIO()))
    run.layout["01_x"] = {"notebooks": {"01_x": 10.0}, "tests": {"01_x": {}}}
    job = run.job("ann", "01_x")
    assert (job.limits.cell_timeout_s, job.limits.threads, job.limits.memory_mb) == (7.0, 3, 1500)
    assert job.limits.timeout_s == settings.default("timeout_s")
    capped = planning.plan(root, {"sandbox": "none", "timeout_s": 5}, reporting.Progress(0, io.StringIO()))
    assert capped.limits.cell_timeout_s == 5   # a cell never outlives its notebook


def test_a_scratch_folder_too_deep_for_the_kernels_sockets_is_refused(tmp_path, monkeypatch):
    """Under a scratch folder 60 bytes deep, a reference run's kernel sockets (pte-grading-*/reference-*/run/
    kernel-N) would pass the 107 bytes a socket's path may have, and ZMQ refused every kernel of the run
    (test_dead_worker.py under pytest-xdist: "File name too long"): the command stops at once and says why."""
    root = _course_with_config(tmp_path, "")
    monkeypatch.setenv("PTE_SCRATCH", "/tmp/" + "d" * 55)
    with pytest.raises(planning.UsageError, match=r"too deep for the kernels' sockets.* at most 53 bytes"):
        planning.plan(root, {"sandbox": "none"}, reporting.Progress(0, io.StringIO()))
    monkeypatch.setenv("PTE_SCRATCH", "/tmp/" + "d" * 48)   # 53 bytes: the deepest that fits
    assert planning.scratch_root() == "/tmp/" + "d" * 48


def test_phase_two_is_nbgraders_own_autograde_with_only_execution_swapped(tmp_path):
    from nbgrader.converters import Autograde

    from autograder import course

    default = list(Autograde.class_traits()["autograde_preprocessors"].default())
    ours = recording.autograde_preprocessors(course.REPO_ROOT)
    assert len(ours) == len(default) and ours[0] is recording.LoadStaged
    assert ours[1:] == default[1:] and any(step.__name__ == "IgnorePattern" for step in ours)
    custom = _course_with_config(tmp_path, "from nbgrader.preprocessors import Execute, LimitOutput\n"
                                           "c.Autograde.autograde_preprocessors = [LimitOutput, Execute]\n")
    assert [s.__name__ for s in recording.autograde_preprocessors(custom)] == ["LimitOutput", "LoadStaged"]


def test_the_recording_step_refuses_a_course_step_that_executes(tmp_path, monkeypatch):
    """An executing step that a course's nbgrader_config.py names in a list the grader does not set (here the
    sanitizing steps) would run the student's code in the recording process, outside the sandbox: the recording
    stops instead, naming it (before issue 47's 53rd stop, nbgrader started a kernel). The autograde steps
    themselves are the grader's, whatever the course's file says (test_dead_worker.py's GENEROUS course)."""
    custom = _course_with_config(tmp_path, "from nbgrader.preprocessors import Execute\n"
                                           "c.Autograde.sanitize_preprocessors = [Execute]\n")
    monkeypatch.chdir(custom)   # where the grader starts it
    with pytest.raises(RuntimeError, match=r"Autograde\.sanitize_preprocessors names Execute, which executes"):
        recording.main([str(custom), "01_tensors_and_views", str(custom / ".grading" / "staged")])


def test_every_status_is_one_enum_member():
    from autograder.grading.status import Status

    result = worker.NotebookResult("s", "a", "n", status="memory-limit")
    assert result.status is Status.MEMORY_LIMIT and json.dumps(result.status) == '"memory-limit"'
    with pytest.raises(ValueError):
        worker.NotebookResult("s", "a", "n", status="fine")


# ---------------------------------------------------------------- stages, protocol and defences

def test_the_command_line_imports_no_jupyter_client_until_a_verb_needs_it():
    """`python -m autograder <any verb>` reads its settings without nbclient or jupyter_client."""
    import subprocess
    import sys

    probe = ("import sys; import autograder.__main__, autograder.grading.cli, autograder.grading.plan.settings; "
             "print(sorted(m for m in ('nbclient', 'jupyter_client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_grading_side_never_imports_the_release_module():
    """autograder/grading/ takes REPO_ROOT and the data folder from autograder/kernel/paths.py, never from
    autograder/course.py (whose import rewrites PATH)."""
    import ast
    from pathlib import Path

    folder = Path(worker.__file__).parent
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                     and node.module and node.level == 0 else [])
            if isinstance(node, ast.ImportFrom) and node.level and (node.module or "").startswith("course"):
                names = ["course"]
            found += [f"{path.name}: {n}" for n in names if n in ("autograder.course", "course")
                      or n.startswith("autograder.course")]
    assert not found, found


def test_no_grading_module_outgrows_a_reading():
    from pathlib import Path

    sizes = {p.name: len(p.read_text().splitlines()) for p in Path(worker.__file__).parent.glob("*.py")}
    assert all(lines <= 400 for lines in sizes.values()), sizes


def test_a_cell_the_student_added_with_grading_metadata_earns_nothing():
    """nbgrader metadata with no grade id (nbgrader itself fails on such a cell) runs as plain code; one that
    claims points is tampering. Metadata that is not a mapping, or a grade id that is not text, too."""
    forged = _nb(("code", "def f(x):\n    return 2 * x", ANSWER),
                 ("code", "print('50 points')", {"grade": True, "solution": False, "locked": True, "points": 50}),
                 ("code", '"""f works."""\nchecks.expect(f(1) == 2, "f")', TEST))
    built = canonical.build(RELEASE, forged, SOURCES)
    assert "nbgrader" not in built.nb.cells[1].metadata
    assert any("claims to be graded" in f for f in built.findings), built.findings
    assert "secret()" in built.nb.cells[2].source
    odd = _nb(("code", "pass", None), ("code", "pass", None), ("code", "pass", None))
    odd.cells[0].metadata["nbgrader"] = 5
    odd.cells[1].metadata["nbgrader"] = {"grade_id": ["test_f"], "grade": True, "points": 3}
    odd.cells[2].metadata["nbgrader"] = {"locked": False}
    built = canonical.build(RELEASE, odd, SOURCES)
    assert all("nbgrader" not in cell.metadata for cell in built.nb.cells)
    assert len([f for f in built.findings if "claims to be graded" in f]) == 1, built.findings


def test_a_message_nested_too_deep_is_dropped_not_raised():
    """The kernel's messages are the student's: one nested past the decoder's recursion, or past what
    nbformat and nbgrader can write back, is dropped and counted."""
    import json

    from autograder.grading.run import kernel_client

    deep = "[" * 5000 + "]" * 5000
    part = kernel_client.read_message_part(json.dumps({"data": {"application/json": "x"}})[:-1] + "")
    assert part.get(kernel_client.UNREADABLE)
    part = kernel_client.read_message_part(('{"data": {"application/json": ' + deep + '}}').encode())
    assert part.get(kernel_client.UNREADABLE)
    assert kernel_client.read_message_part(b'{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    nested: list = []
    for _ in range(settings.MAX_OUTPUT_DEPTH + 5):
        nested = [nested]
    assert kernel_client.too_deep({"data": {"application/json": nested}})
    assert not kernel_client.too_deep({"data": {"text/plain": "x", "application/json": [[1, 2], {"a": [3]}]}})


def test_one_hidden_split_for_the_release_the_grader_and_the_self_check():
    from autograder.kernel import selfcheck

    source = '"""doc"""\ncheck(1)\n### BEGIN HIDDEN TESTS\nsecret(2)\n### END HIDDEN TESTS\nafter()\n'
    assert protocol.split_hidden(source) == ('"""doc"""\ncheck(1)\n', "secret(2)\n\nafter()\n")
    assert selfcheck.visible_part(source) == '"""doc"""\ncheck(1)\n'
    assert protocol.split_hidden("check()\n  ###  BEGIN HIDDEN TESTS\nsecret()") == ("check()\n", "secret()")
    assert protocol.split_hidden("check()\n") == ("check()\n", "")


def test_the_reference_file_is_written_and_read_in_one_shape(tmp_path):
    entry = {"label": "x", "value": {"type": "float", "value": 1.0}, "atol": 1e-6, "rtol": 0.0, "hint": None}
    reference = protocol.Reference("01_x", {"test_f": protocol.Reference.entries([Observation("test_f", 0, **entry)])})
    path = tmp_path / protocol.REFERENCE_FILE
    reference.write(path, key="k")
    assert protocol.Reference.read(path) == reference
    assert json.loads(path.read_text())["format"] == protocol.REFERENCE_FORMAT
    path.write_text('{"format": 99, "cells": {}}')
    with pytest.raises(protocol.ReferenceUnreadable, match="format"):
        protocol.Reference.read(path)


def test_the_self_check_takes_the_courses_cell_timeout(tmp_path):
    from autograder.kernel import selfcheck

    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.Execute.timeout = 45\n"
                                                 "import os\nos.environ['PTE_SELFCHECK_PROBE'] = '1'\n")
    (tmp_path / "notebooks").mkdir()
    assert selfcheck.course_cell_timeout(tmp_path / "notebooks") == 45
    assert "PTE_SELFCHECK_PROBE" not in os.environ
    from autograder import course

    assert selfcheck.course_cell_timeout(course.REPO_ROOT) == 120   # this course's nbgrader_config.py


def test_a_submission_run_before_its_reference_is_judged_with_it(monkeypatch, tmp_path):
    """The engine queues every submission behind the references; a worker that has run one before its
    assignment's reference is in blocks on that assignment's Event (it never polls) and judges with what the
    engine wrote once the Event is set; a reference that never comes is none."""
    import multiprocessing
    import threading
    import time

    limits = settings.Limits(timeout_s=0.1, cell_timeout_s=0.1, memory_mb=100, output_mb=1, threads=1, sandbox=False,
                             processes=8, disk_mb=8)
    paths = jobs.Paths(*(["."] * 6))
    ready = {"a": multiprocessing.Event(), "other": multiprocessing.Event(), "never": multiprocessing.Event()}
    jobs.expect_references(ready)
    monkeypatch.setattr(time, "sleep", lambda seconds: pytest.fail("the worker polled for its reference"))
    protocol.Reference("other", {"test_b": [{"value": 2}]}).write(tmp_path / "other.json")
    ready["other"].set()
    job = jobs.Job("s", "a", {"nb": 1.0}, {}, paths, limits, reference_file=str(tmp_path / "a.json"))

    def publish():   # what Engine.reference_ready does
        protocol.Reference("a", {"test_a": [{"value": 1}]}).write(tmp_path / "a.json")
        ready["a"].set()

    threading.Timer(0.3, publish).start()
    assert job.judged_with() == {"test_a": [{"value": 1}]}
    given = jobs.Job("s", "a", {"nb": 1.0}, {}, paths, limits, {"test_a": []}, reference_file=str(tmp_path / "x"))
    assert given.judged_with() == {"test_a": []}, "a reference given with the job is used as it is"
    monkeypatch.setattr(jobs, "REFERENCE_GRACE_S", 0.2)
    lost = jobs.Job("s", "never", {"nb": 1.0}, {}, paths, limits, reference_file=str(tmp_path / "never.json"))
    assert lost.judged_with() == {}, "a reference that never comes is none (the worker reports it missing)"


def test_a_grading_process_waiting_for_its_reference_wakes_when_the_engine_sets_it(tmp_path):
    """Across processes, as the engine runs it: the Event reaches each worker through the pool's initializer,
    the worker blocks on it, and the engine's write and set wake it."""
    import concurrent.futures as futures
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    ready = {"a": context.Event()}
    limits = settings.Limits(timeout_s=30, cell_timeout_s=30, memory_mb=100, output_mb=1, threads=1, sandbox=False,
                             processes=8, disk_mb=8)
    job = jobs.Job("s", "a", {"nb": 1.0}, {}, jobs.Paths(*(["."] * 6)), limits,
                     reference_file=str(tmp_path / "a.json"))
    with futures.ProcessPoolExecutor(1, mp_context=context, initializer=jobs.expect_references,
                                     initargs=(ready,)) as pool:
        waiting = pool.submit(jobs.Job.judged_with, job)
        done, _ = futures.wait([waiting], timeout=1.0)
        assert not done, "the worker judged before the reference was in"
        protocol.Reference("a", {"test_a": [{"value": 1}]}).write(tmp_path / "a.json")
        ready["a"].set()
        assert waiting.result(timeout=60) == {"test_a": [{"value": 1}]}


def test_the_watchdog_finds_the_kernels_processes_in_its_cgroup(tmp_path):
    """A kernel, its child and grandchild, an unrelated process and one that has ended are listed in the
    group; the watchdog's family is the kernel and its descendants, as psutil finds them among all the host's."""
    import subprocess
    import sys

    import psutil

    tree = ("import subprocess, sys, time\n"
            "inner = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(inner.pid, flush=True); time.sleep(60)")
    kernel = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"child = subprocess.Popen([sys.executable, '-c', {tree!r}], stdout=sys.stdout)\n"
                               f"time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    try:
        grandchild = int(kernel.stdout.readline())
        root = psutil.Process(kernel.pid)
        child = root.children()[0].pid
        procs = tmp_path / "cgroup.procs"
        procs.write_text("".join(f"{pid}\n" for pid in (other.pid, grandchild, ended.pid, kernel.pid, child)))
        found = sorted(p.pid for p in runner.family_in_group(root, procs))
        assert found == sorted([kernel.pid, child, grandchild])
        assert found == sorted(p.pid for p in [root] + root.children(recursive=True))
    finally:
        for proc in psutil.Process(kernel.pid).children(recursive=True) + [psutil.Process(kernel.pid)]:
            proc.kill()
        other.kill()


def test_grading_kernels_get_the_ready_client():
    """The grader's client, ready as soon as the kernel answers (kernel_client.ReadyClient), is the one its kernel
    manager makes: AsyncKernelManager makes clients with client_factory, and a client_class alone never got there."""
    from autograder.grading.run.kernel_client import ReadyClient, SandboxedKernelManager

    assert isinstance(SandboxedKernelManager(kernel_name="python3").client(), ReadyClient)
