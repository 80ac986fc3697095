"""Course tests: the lessons themselves (the solutions run, the release in sync, the pitfall tables,
figures, spawn-safe workers). In ``make test-quick``; narrow them with PTE_LESSONS.

This folder's conftest.py marks every test collected under it ``course`` (``grouping.mark_layer``): the
mark comes from where a file lives, so a renamed file keeps it.
"""
import pytest

from grouping import mark_layer


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    mark_layer(__file__, items, ('course',))
