"""A pytest plugin for nbval runs under the rounding jitter (``-p jitter_report``).

A failing cell listed in ``jitter.REFERENCE_CELLS`` or ``jitter.ARTIFACTS`` is reported as an expected
failure (``XFAIL``, with the reason) instead of a failure; every other cell must match its stored output.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from jitter import ARTIFACTS, REFERENCE_CELLS

APART = {**{key: f"reference figure: {why}" for key, why in REFERENCE_CELLS.items()},
         **{key: f"jitter artifact: {why}" for key, why in ARTIFACTS.items()}}
MARK = "moved under the jitter, reported apart"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell = getattr(item, "cell", None)
    if cell is None or report.when != "call" or not report.failed:
        return
    key = (Path(str(item.fspath)).stem, cell.get("id"))
    if key in APART:
        report.outcome = "skipped"
        report.wasxfail = f"{MARK}: {key[0]} {key[1]}: {APART[key]}"
