"""Test groups: the order they start in under pytest-xdist, and which are slow.

``make test`` runs ``-n auto --dist loadfile``: a file runs whole on one worker, so it
shares its fixtures (one kernel per lesson in test_pitfalls, one scratch course for every
lesson in test_autograde, one nbval kernel per notebook). The longest files start first.
The slow groups get a ``slow`` mark, which ``make test-quick`` leaves out.
"""
from __future__ import annotations

from pathlib import Path

import pytest

# left out of `make test-quick` (lesson editing): the grading battery, PostgreSQL, the browser, the round trips
SLOW = {"battery", "postgres", "browser", "roundtrip", "test_exchange", "test_student_edition", "test_cross_cpu",
        "test_flood", "test_grading_trust", "test_dead_worker"}
# lower starts earlier; measured with --durations (the battery and round trips dominate)
PRIORITY = {"battery": 0, "roundtrip": 1, "test_grading_trust": 2, "postgres": 2, "test_cross_cpu": 3,
            "test_student_edition": 3, "pitfalls": 4, "nbval": 5, "release": 6, "lab": 7}


def group_of(item) -> str:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        return f"nbval-{path.parent.name}"
    name = path.stem
    lesson = getattr(getattr(item, "callspec", None), "params", {}).get("lesson")
    if name == "test_grading":
        return "battery"
    if name == "test_autograde":
        return "roundtrip"      # one scratch course for every lesson (one module fixture)
    if name == "test_pitfalls" and lesson:
        return f"pitfalls-{lesson}"
    if name == "test_pitfalls":
        params = getattr(getattr(item, "callspec", None), "params", {})
        return f"pitfalls-{params.get('lesson', 'all')}"
    if name == "test_grading_postgres":
        return "postgres"
    if name == "test_browser":
        return "browser"
    return name


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    groups = {}
    for item in items:
        group = group_of(item)
        groups[item.nodeid] = group
        if group.split("-")[0] in SLOW or group in SLOW:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: PRIORITY.get(groups[item.nodeid].split("-")[0], 9))
