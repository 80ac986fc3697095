"""A pytest plugin for nbval runs in record mode (``-p nbval_keep``, ``PTE_OBSERVE=record``): nbval compares the
outputs, the judge the observations, and every cell's outputs are kept for another run to compare.

With ``PTE_OBSERVE=record`` (as ``make release`` and the grading command run them) the hidden checks publish
their observations as display outputs instead of comparing them in the kernel. Here, for every code cell:

- nbval's own comparison (its sanitizers, ``nbval-ignore-output``, its coalesced streams) sees the outputs
  without the observations, which the stored outputs never hold;
- the observations are decided by the grading command's judge (``judge.judge_cell``) against the reference
  file beside the notebook, their labels checked as the kernel's compare mode checks them; a run in which a
  test cell of a reference published no observation fails when it ends;
- the cell's executed outputs as the kernel sent them (observations included, each stream's writes as they came,
  before nbval joins them), and whether the notebook's kernel was forked from a warm template, are written as
  JSON to the file named by ``PTE_NBVAL_KEEP`` when the run ends.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest
from nbval import plugin as nbval_plugin
from nbval.plugin import IPyNbCell

from autograder.grading.judging import judge
from autograder.kernel.vocabulary import messages, protocol
from autograder.warm.pool import ForkedProcess

from nbvalkit import KEEP_ENV

_KEPT: dict[str, dict] = {}   # lesson -> {"forked": bool, "cells": {cell id: outputs}, "judged": [grade ids]}
_nbval_compare = IPyNbCell.compare_outputs
_nbval_coalesce = nbval_plugin.coalesce_streams
_RAW: list[list[dict]] = []   # the executed outputs of the cell running now, as the kernel sent them


def _coalesce_keeping_raw(outputs):
    """nbval's own join of each stream's writes (it changes the first write in place): the cell's first call,
    on its executed outputs, keeps a copy of them first, streams cut and ordered as the kernel sent them."""
    if not _RAW:
        _RAW.append([dict(output) for output in outputs])
    return _nbval_coalesce(outputs)


nbval_plugin.coalesce_streams = _coalesce_keeping_raw


def _compare_without_observations(self, test, ref, skip_compare=None):
    return _nbval_compare(self, protocol.without_observations(test), ref, skip_compare)


IPyNbCell.compare_outputs = _compare_without_observations


@functools.cache
def _reference(folder: str) -> dict[str, list[dict]]:
    return protocol.Reference.read(Path(folder) / protocol.REFERENCE_FILE).cells


def _judged(item, outputs: list) -> str | None:
    """The judge's verdict on the cell's observations (None: passed, or no observation and none expected)."""
    grade_id = protocol.nbgrader_meta(item.cell).get("grade_id", "")
    reference = _reference(str(Path(str(item.fspath)).parent))
    observed = protocol.observations_in(outputs)
    if not observed and grade_id not in reference:
        return None
    expected = reference.get(grade_id, [])
    verdict = judge.judge_cell(expected, observed, finished=True)
    if not verdict.passed:
        return f"{grade_id}: {verdict.reason}"
    labels = [o.label for o in observed if isinstance(o, messages.Observation)]
    if labels != [entry["label"] for entry in expected]:
        return f"{grade_id}: observed labels {labels}, the reference's {[entry['label'] for entry in expected]}"
    _KEPT[Path(str(item.fspath)).stem]["judged"].append(grade_id)
    return None


def _keep_and_judge(item) -> None:
    """Run nbval's test of one cell, then keep its outputs and judge its observations."""
    lesson = Path(str(item.fspath)).stem
    kept = _KEPT.setdefault(lesson, {"forked": None, "cells": {}, "judged": [],
                                     "folder": str(Path(str(item.fspath)).parent)})
    _RAW.clear()
    try:
        item.nbval_runtest()
    finally:
        kernel = getattr(item.parent, "kernel", None)
        if kept["forked"] is None and kernel is not None:
            kept["forked"] = isinstance(kernel.km.provisioner.process, ForkedProcess)
        # a cell that failed to run stopped before nbval joined its streams
        outputs = _RAW[0] if _RAW else [dict(output) for output in (item.test_outputs or [])]
        kept["cells"][item.cell.get("id") or f"cell-{item.cell_num}"] = outputs
    wrong = _judged(item, outputs)
    if wrong:
        raise AssertionError(f"hidden check judged against the stored reference: {wrong}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    cells = [item for item in items if isinstance(item, IPyNbCell)]
    for item in cells:
        item.nbval_runtest = item.runtest
        item.runtest = lambda item=item: _keep_and_judge(item)


def pytest_sessionfinish(session, exitstatus):
    """Every test cell of the reference judged (one that published nothing fails the run here), and the kept
    outputs written."""
    for lesson, kept in _KEPT.items():
        missing = sorted(set(_reference(kept["folder"])) - set(kept["judged"]))
        if missing:
            print(f"\n{lesson}: these test cells published no observations to judge: {missing}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if os.environ.get(KEEP_ENV):
        Path(os.environ[KEEP_ENV]).write_text(json.dumps(_KEPT))
