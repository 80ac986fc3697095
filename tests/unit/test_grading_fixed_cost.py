"""What one grading run starts before its first kernel, for a single submission (the feedback service's runs):
a reference the cache holds is read, not run, and no grading process is started that would only import torch
for nothing; a cache entry for anything else than what decides the numbers now is never used."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grading.plan import job as jobs
from autograder.grading.plan import planning, settings
from autograder.grading.run import engine, reference
from autograder.kernel.vocabulary import protocol

LIMITS = settings.Limits(timeout_s=30, cell_timeout_s=30, memory_mb=100, output_mb=1, threads=1, sandbox=False,
                         processes=8, disk_mb=8)
CELLS = {"test_a": [{"label": "a", "value": 1}]}


def _course(tmp_path: Path) -> tuple[Path, Path]:
    """A solution folder with one notebook and its stored record, and the run's .grading folder."""
    (tmp_path / "source" / "lesson").mkdir(parents=True)
    (tmp_path / "source" / "lesson" / "lesson.ipynb").write_text('{"solution": 1}')
    protocol.Reference("lesson", CELLS).write(tmp_path / "source" / "lesson" / protocol.REFERENCE_FILE)
    (tmp_path / "grading").mkdir()
    return tmp_path / "source", tmp_path / "grading"


def _cache(source: Path, grading: Path, cells=None) -> Path:
    """The cache entry a run of the solution on this host writes, as host_reference writes it."""
    key = reference.cache_key([source / "lesson" / "lesson.ipynb"], LIMITS.threads)
    entry = grading / reference.CACHE_DIR / f"lesson-{key}.json"
    entry.parent.mkdir(exist_ok=True)
    protocol.Reference("lesson", cells or CELLS).write(entry, key=key)
    return entry


def test_a_cached_reference_is_read_without_running_and_a_stale_or_unreadable_one_is_not(tmp_path, monkeypatch):
    source, grading = _course(tmp_path)
    monkeypatch.setattr(reference, "run_solution", lambda *a: pytest.fail("the solution ran for a cached reference"))
    assert reference.cached_reference(source, "lesson", ["lesson"], LIMITS, grading) is None, "nothing cached yet"
    entry = _cache(source, grading)
    found = reference.cached_reference(source, "lesson", ["lesson"], LIMITS, grading)
    assert found is not None and found.cached and found.cells == CELLS and found.source == "host"
    assert found.summary() == reference.host_reference(source, "lesson", ["lesson"], LIMITS, tmp_path,
                                                       grading).summary(), "the same answer as the grading process's"
    assert reference.cached_reference(source, "lesson", ["lesson"], settings.Limits(**{
        **LIMITS.__dict__, "threads": 2}), grading) is None, "another thread count: another key"
    entry.write_text(json.dumps({"format": "not ours", "cells": {}}))
    assert reference.cached_reference(source, "lesson", ["lesson"], LIMITS, grading) is None, "unreadable entry"
    _cache(source, grading)
    (source / "lesson" / "lesson.ipynb").write_text('{"solution": 2}')   # the instructor fixed the solution
    assert reference.cached_reference(source, "lesson", ["lesson"], LIMITS, grading) is None, "stale entry used"
    (source / "lesson" / "lesson.ipynb").unlink()
    assert reference.cached_reference(source, "lesson", ["lesson"], LIMITS, grading) is None, "no solution"


class _Pool:
    def __init__(self, jobs, context, slots, template_env=None, reference_events=None, shared=None):
        self.jobs, self.slots, self.shared = jobs, list(slots), shared


class _Recorder:
    def __init__(self, course, log):
        pass

    def start(self):
        pass


def _engine(tmp_path: Path, monkeypatch, students: list[str], cached: bool, jobs_: int = 2) -> engine.Engine:
    """An engine for a plan of ``students`` of one lesson (its pool and recorder stand-ins: nothing starts)."""
    source, grading = _course(tmp_path)
    if cached:
        _cache(source, grading)
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(engine, "Workers", _Pool)
    monkeypatch.setattr(engine.recording, "Recorder", _Recorder)
    paths = jobs.Paths(str(tmp_path), str(tmp_path), str(source), str(grading), str(grading / "staged"),
                       str(tmp_path / "scratch"))
    plan = planning.Plan(SimpleNamespace(jobs=jobs_, course=tmp_path), None,
                         {"lesson": {"notebooks": {"lesson": 1.0}, "tests": {"lesson": {}}}},
                         [(s, "lesson") for s in students], paths, LIMITS, "none", None)
    return engine.Engine(plan, SimpleNamespace(log=lambda text: None, total=0))


def test_one_submission_with_a_cached_reference_starts_one_grading_process(tmp_path, monkeypatch):
    """Each grading process costs a start, and a run of one starts its own warm template (torch, matplotlib,
    ipykernel imported: about 3 CPU seconds); a second one, for a reference already cached, was never used."""
    monkeypatch.setattr(engine, "cpu_sets", lambda n: [str(i) for i in range(n)])
    run = _engine(tmp_path / "a", monkeypatch, ["alice"], cached=False)
    assert run.pool.jobs == 2 and not run.cached, "uncached: the reference run and the submission, at once"
    run = _engine(tmp_path / "b", monkeypatch, ["alice"], cached=True)
    assert run.pool.jobs == 1 and run.pool.slots == ["0"] and set(run.cached) == {"lesson"}
    assert _engine(tmp_path / "c", monkeypatch, ["a", "b", "c"], cached=True).pool.jobs == 2, "--jobs still caps"


def test_a_cached_reference_is_published_before_any_submission_runs(tmp_path, monkeypatch):
    """The engine writes it where the workers read it and sets its Event, and queues no reference run."""
    run = _engine(tmp_path, monkeypatch, ["alice"], cached=True)
    started = []

    def stop(work):
        started.append(work)
        raise StopIteration

    monkeypatch.setattr(run, "start", stop)
    run.pool.free_slots = lambda: 1
    with pytest.raises(StopIteration):
        run.run()
    assert [type(w).__name__ for w in started] == ["SubmissionRun"], "a reference run was queued for a cached one"
    assert run.reference_events["lesson"].is_set()
    assert protocol.Reference.read(Path(run.reference_file("lesson"))).cells == CELLS
    assert run.references["lesson"].cached


def test_the_recording_process_leaves_at_once_with_its_log_written(tmp_path):
    """The recorder skips the interpreter's teardown once the grader closes its requests (0.3 s at the end of
    every run), but what it wrote before, its answers and its log, is all there, and it exits 0."""
    from autograder.grading.record import recording

    (tmp_path / "nbgrader_config.py").write_text('print("the course config, read by the recorder")\n')
    recorder = recording.Recorder(tmp_path, tmp_path / "phase2.log")
    error = recorder.record("no-such-lesson", tmp_path / "staged", ["alice"], 300)
    assert error and "no-such-lesson" in error
    proc = recorder.proc
    recorder.stop()
    assert proc.returncode == 0
    log = (tmp_path / "phase2.log").read_text()
    assert "no-such-lesson" in log and "the course config, read by the recorder" in log


def test_leaving_flushes_what_was_buffered(tmp_path):
    """stdout to a file is block-buffered (as the recorder's is, PYTHONUNBUFFERED unset): os._exit alone would lose
    what it holds."""
    import os
    import subprocess
    import sys

    probe = ("import sys; from autograder.grading.record.recording import leave; "
             "sys.stdout.write('buffered'); sys.stderr.write('no newline'); leave(3)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(tmp_path / "out.log", "w") as out, open(tmp_path / "err.log", "w") as err:
        code = subprocess.run([sys.executable, "-c", probe], stdout=out, stderr=err, env=env, timeout=120).returncode
    assert code == 3
    assert (tmp_path / "out.log").read_text() == "buffered" and (tmp_path / "err.log").read_text() == "no newline"


def test_a_run_of_several_grading_processes_starts_one_template_for_them_all(tmp_path, monkeypatch):
    """With warm kernels, the run starts one template and hands its socket to every grading process (each a
    launcher of its own on it: tests/unit/test_warm_shared.py); a run of one grading process leaves it to that one."""
    from autograder.warm import pool

    started = []
    monkeypatch.setattr(engine.runner, "template_env_for", lambda limits: {"PATH": "/bin"})
    monkeypatch.setattr(pool, "share", lambda env, folder: started.append(folder) or str(folder / pool.SHARED_NAME))
    monkeypatch.setattr(engine, "cpu_sets", lambda n: [str(i) for i in range(n)])
    run = _engine(tmp_path / "two", monkeypatch, ["a", "b", "c"], cached=True)
    assert run.pool.jobs == 2 and started == [tmp_path / "two" / "scratch" / "template"]
    assert run.pool.shared == str(started[0] / pool.SHARED_NAME)
    alone = _engine(tmp_path / "one", monkeypatch, ["a"], cached=True)
    assert alone.pool.jobs == 1 and alone.pool.shared is None and len(started) == 1
