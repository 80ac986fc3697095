"""End-to-end tests: whole grading runs, the student edition, JupyterLab in a browser, the shared
gradebook, another CPU's vector code. Slow: ``make test`` runs them, ``make test-quick`` does not.

This folder's conftest.py marks every test collected under it ``e2e`` and ``slow`` (``grouping.mark_layer``): the
mark comes from where a file lives, so a renamed file keeps it.
"""
import pytest

from grouping import mark_layer


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    mark_layer(__file__, items, ('e2e', 'slow'))
