"""Unit tests: one module of ``autograder/`` (or a lesson helper) at a time, no grading run and no
browser. Quick: in ``make test-quick``.

This folder's conftest.py marks every test collected under it ``unit`` (``grouping.mark_layer``): the
mark comes from where a file lives, so a renamed file keeps it.
"""
import pytest

from grouping import mark_layer


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    mark_layer(__file__, items, ('unit',))
