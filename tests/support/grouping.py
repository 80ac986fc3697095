"""Test layers and groups: which marks a test gets, and the order groups start in under pytest-xdist.

Layers are folders (``tests/unit``, ``tests/course``, ``tests/e2e``; helpers in ``tests/support``). Each
layer's conftest.py calls :func:`mark_layer`, so a test's marks follow the folder it lives in: ``e2e``
tests are also ``slow``, which ``make test-quick`` leaves out.

``make test`` runs ``-n <cores + 1> --dist loadfile --no-loadscope-reorder``: a file runs whole on one worker, so it
shares its fixtures (one kernel per lesson in test_pitfalls, one scratch course for every
lesson in test_autograde, one nbval kernel per notebook). The longest groups start first (``SECONDS``); without
``--no-loadscope-reorder`` xdist would start the files with the most test cases first instead.
"""
from __future__ import annotations

from pathlib import Path

import pytest

LAYERS = ("unit", "course", "e2e")
# Seconds each group took in a whole `make test` (3 workers, --dist loadfile, a loaded 2-core machine; the per-file
# summary this plugin prints at the end): the longest start first, so that the workers finish together instead of
# one worker starting a 200 s file when the others are nearly done. A group not listed counts as 0 s (it fills the
# tail). Only the order matters; update the figures from a run's summary when a file grows or shrinks a lot.
# The figures are a fresh clone's run at ffe60ea (3 workers beside other work, so every file is slower than alone),
# with what was merged after it: test_warm_kernels holds test_lesson_outputs' checks (one execution of six lessons
# fewer), test_verdict_recorded's grading run is test_dead_worker's, test_hidden_probes' students are graded in
# test_grading_trust, test_cross_cpu keeps only the emulation probe (seconds, so not listed).
SECONDS = {"pitfalls": 285, "battery": 243, "test_warm_kernels": 230, "roundtrip": 213, "test_hub": 196,
           "test_rounding_jitter": 171, "test_dead_worker": 159, "test_feedback_service": 134, "test_browser": 132,
           "test_class_report_graded": 130, "test_slurm": 124, "test_gpu_runner": 111, "test_grading_trust": 102,
           "test_warm_isolation": 94, "test_spawn": 83, "test_student_edition": 66, "postgres": 61,
           "test_exchange": 47, "test_flood": 40, "nbval": 40, "test_warm": 40}


def mark_layer(conftest: str, items, marks: tuple[str, ...]) -> None:
    """Give ``marks`` to every item collected under the folder of ``conftest``."""
    folder = Path(conftest).resolve().parent
    for item in items:
        if folder in Path(str(item.fspath)).resolve().parents:
            for mark in marks:
                item.add_marker(getattr(pytest.mark, mark))


def group_of(item) -> str:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        return f"nbval-{path.parent.name}"
    name = path.stem
    params = getattr(getattr(item, "callspec", None), "params", {})
    if name == "test_grading":
        return "battery"
    if name == "test_autograde":
        return "roundtrip"      # one scratch course for every lesson (one module fixture)
    if name == "test_pitfalls":
        return f"pitfalls-{params.get('lesson', 'all')}"
    if name == "test_grading_postgres":
        return "postgres"
    return name


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    groups = {item.nodeid: group_of(item) for item in items}
    items.sort(key=lambda item: -SECONDS.get(groups[item.nodeid].split("-")[0], 0))


# Where a run's time goes, per file and per worker (setup, call and teardown summed): printed at the end, so
# that the groups' priorities above can follow what a run measured.
_SECONDS: dict[str, float] = {}
_WORKERS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if hasattr(report, "duration"):
        name = report.nodeid.split("::")[0]
        _SECONDS[name] = _SECONDS.get(name, 0.0) + report.duration
        worker = getattr(getattr(report, "node", None), "gateway", None)
        worker = getattr(worker, "id", "main")
        _WORKERS[worker] = _WORKERS.get(worker, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not _SECONDS:
        return
    terminalreporter.write_sep("=", f"seconds per test file (the 20 longest of {len(_SECONDS)}; "
                               f"{sum(_SECONDS.values()):.0f} s in all)")
    for name, seconds in sorted(_SECONDS.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}  {name}")
    terminalreporter.write_line("per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(_WORKERS.items())))
