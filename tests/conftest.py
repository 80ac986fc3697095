"""Importing autograder.course puts the venv's scripts (nbgrader calls `alembic`) on PATH.

It also holds the session hooks for notebook cells that need a GPU. A code cell tagged
``requires-cuda`` only makes sense with CUDA:

- without CUDA, nbval's item for such a cell is skipped with the reason
  "requires CUDA (not available here): Cell N (id ...)", and ``-ra`` (in addopts) lists
  every one of them;
- with CUDA nothing is skipped, and a ``requires-cuda`` cell that did not run anyway
  (an ``nbval-skip`` tag, a skip from elsewhere) fails the session;
- with ``PTE_EXPECT_CUDA=1`` (the GPU runner, ``.ci/gpu-test.sh``, sets it) a missing CUDA
  is an error, not a reason to skip.

Only session-wide hooks are used (collection, session end, xdist's node-down), because
pytest calls a conftest's per-test hooks only for tests below its folder, and these must
reach the notebooks under ``solutions/`` too. They apply whenever this file is loaded:
``tests/`` is collected (``make test``), or it is given as a plugin (``-p conftest`` with
``tests/`` on ``sys.path``, as the GPU runner does). Under pytest-xdist each worker reports
the CUDA cells it collected and ran, and the controller checks the union.
"""
import os
import shutil
import tempfile

import pytest

import autograder.course  # noqa: F401
from autograder.kernel.vocabulary import protocol

REQUIRES_CUDA = protocol.REQUIRES_CUDA
SKIP_REASON = "requires CUDA (not available here)"
EXPECT_CUDA_ENV = "PTE_EXPECT_CUDA"
SHARED_REFERENCE_CACHE_ENV = "TESTS_REFERENCE_CACHE"   # coursekit.SHARED_REFERENCE_CACHE_ENV
SHARED_RELEASE_CACHE_ENV = "TESTS_RELEASE_CACHE"   # coursekit.SHARED_RELEASE_CACHE_ENV
# requires-cuda cells this process expects to run, and those that did (nodeids); under xdist
# the controller gathers the workers' lists here.
_CUDA_CELLS = {"expected": set(), "ran": set()}


def cuda_available() -> bool:
    """``torch.cuda.is_available()``, or ``False`` where torch is missing."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def requires_cuda(item) -> bool:
    """Is ``item`` nbval's test of a notebook cell tagged ``requires-cuda``?"""
    cell = getattr(item, "cell", None)
    if cell is None:
        return False
    return REQUIRES_CUDA in (cell.get("metadata", {}).get("tags") or [])


def _cell_name(item) -> str:
    cell_id = item.cell.get("id")
    return f"{item.name} (id {cell_id})" if cell_id else item.name


def pytest_configure(config):
    """A kernel named with ``--nbval-kernel-name`` (``make test``: the warm ``pte-warm``) wins over addopts'
    ``--nbval-current-env``, which nbval would prefer: pte-warm runs this venv's own Python, so it is the
    current environment still.

    The controller (or a run without xdist) makes the run's shared reference and release caches (coursekit.py),
    before xdist starts the workers that inherit the variables; they are removed when the run ends."""
    if getattr(config.option, "nbval_kernel_name", None):
        config.option.nbval_current_env = False
    if hasattr(config, "workerinput"):
        return
    for env, prefix in ((SHARED_REFERENCE_CACHE_ENV, "pte-reference-cache-"),
                        (SHARED_RELEASE_CACHE_ENV, "pte-release-cache-")):
        if not os.environ.get(env):
            os.environ[env] = tempfile.mkdtemp(prefix=prefix)
            config.add_cleanup(lambda env=env: shutil.rmtree(os.environ.pop(env), ignore_errors=True))


@pytest.hookimpl(trylast=True)  # after -k / -m deselection, so only cells meant to run are tracked
def pytest_collection_modifyitems(config, items):
    cells = [item for item in items if requires_cuda(item)]
    if not cells:
        return
    if cuda_available():
        ran: list[str] = []
        worker_output = getattr(config, "workeroutput", None)  # set on a pytest-xdist worker
        if worker_output is not None:
            worker_output["pte_cuda_expected"] = [item.nodeid for item in cells]
            worker_output["pte_cuda_ran"] = ran  # filled while the worker runs, sent when it finishes
        else:
            _CUDA_CELLS["expected"].update(item.nodeid for item in cells)
        for item in cells:
            _record_when_run(item, ran)
        return
    if os.environ.get(EXPECT_CUDA_ENV) == "1":
        names = ", ".join(item.nodeid for item in cells)
        raise pytest.UsageError(
            f"{EXPECT_CUDA_ENV}=1 but torch.cuda.is_available() is False, so these CUDA-only cells cannot run: "
            f"{names}. Check the driver, CUDA_VISIBLE_DEVICES and that torch is a CUDA build.")
    for item in cells:  # name the cell: -ra folds skips with one location and one reason into a single line
        item.add_marker(pytest.mark.skip(reason=f"{SKIP_REASON}: {_cell_name(item)}"))


def _record_when_run(item, ran: list) -> None:
    """Wrap ``item.runtest`` so that a cell that really executed (passing or failing) is remembered."""
    runtest = item.runtest

    def remember():
        ran.append(item.nodeid)
        if getattr(item.config, "workeroutput", None) is None:
            _CUDA_CELLS["ran"].add(item.nodeid)

    def run_and_record():
        try:
            runtest()
        except pytest.skip.Exception:
            raise
        except BaseException:
            remember()
            raise
        remember()

    item.runtest = run_and_record


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: gather what a finished worker expected and ran."""
    output = getattr(node, "workeroutput", None) or {}
    _CUDA_CELLS["expected"].update(output.get("pte_cuda_expected", []))
    _CUDA_CELLS["ran"].update(output.get("pte_cuda_ran", []))


def pytest_sessionfinish(session, exitstatus):
    if getattr(session.config, "workeroutput", None) is not None:
        return  # an xdist worker: the controller decides
    if not _CUDA_CELLS["expected"] or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return
    missing = sorted(_CUDA_CELLS["expected"] - _CUDA_CELLS["ran"])
    if not missing:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = ("CUDA is available, yet these cells tagged requires-cuda did not run (nothing may be skipped "
               "on a CUDA run):\n  " + "\n  ".join(missing))
    if reporter is not None:
        reporter.write_sep("=", "CUDA-only cells not run", red=True)
        reporter.write_line(message)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
