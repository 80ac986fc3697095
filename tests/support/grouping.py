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
# The ten longest are the fresh clone's run at 1232e53 less what issue 47 cut from them, measured file by file
# (test_browser 250 s: the releases of lessons 02-09 and a 30 s wait for Run All gone; pitfalls 181 s: 15 % fewer
# answers run; battery 178 s: 5 s cell timeouts, 159 s -> 126 s alone; feedback service 107 s: 78 s -> 64 s alone);
# the files that run was not listing among its ten longest are capped at 80 s (they took less than test_hub's 81 s).
# test_rounding_jitter (170 s at 0649de0) and test_slurm (94 s) are scaled by what the jitter's NumPy nudge and the
# four-student class cut, alone in one period: 210 s -> 128 s and 145 s -> 84 s.
SECONDS = {"test_warm_kernels": 167, "pitfalls": 155, "test_browser": 150, "roundtrip": 149, "battery": 141,
           "test_rounding_jitter": 104, "test_feedback_service": 88, "test_class_report_graded": 93,
           "test_gpu_runner": 85, "test_hub": 81, "test_student_edition": 80, "test_grading_trust": 80,
           "test_warm_isolation": 80, "test_verdict_recorded": 80, "test_slurm": 55, "postgres": 80,
           "test_dead_worker": 62, "test_exchange": 53, "test_cross_cpu": 52, "test_hidden_probes": 51,
           "test_warm": 47, "test_flood": 46, "nbval": 40}


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
