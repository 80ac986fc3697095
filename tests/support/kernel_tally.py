"""How many kernels ``make test`` starts, and which tests start them (issue: each notebook run proves
something new). The count is printed at the end of the run, with the files that start the most.

The controller makes a tally file and puts ``tests/support/tally`` on ``PYTHONPATH`` before pytest-xdist
starts its workers, so every process of the run loads ``tally/sitecustomize.py`` and writes a line per
kernel it launches (in-process nbclient and nbval, the grading command, nbgrader, subprocesses).
Set ``TESTS_KERNEL_TALLY`` yourself to keep the file after the run.
"""
from __future__ import annotations

import collections
import os
import sys
import tempfile
from pathlib import Path

import pytest

TALLY_DIR = Path(__file__).with_name("tally")
sys.path.insert(0, str(TALLY_DIR))
import sitecustomize as tally  # noqa: E402  (the file on PYTHONPATH; a no-op until the variable is set)

_OWN_FILE: list[Path] = []
# a pytest run started by a test (nbval over a copy, the edition's make check) keeps the outer test as owner
_INHERITED_OWNER = os.environ.get(tally.OWNER_ENV)


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        return   # an xdist worker: it inherited the variables and loaded the tally at start-up
    if not os.environ.get(tally.TALLY_ENV):
        handle, name = tempfile.mkstemp(prefix="pte-kernel-tally-", suffix=".tsv")
        os.close(handle)
        os.environ[tally.TALLY_ENV] = name
        _OWN_FILE.append(Path(name))
    paths = [str(TALLY_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    tally.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _INHERITED_OWNER:
        yield
        return
    os.environ[tally.OWNER_ENV] = item.nodeid
    try:
        yield
    finally:
        os.environ.pop(tally.OWNER_ENV, None)


def read(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        test, how, _pid = line.split("\t")
        rows.append((test, how))
    return rows


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    path = Path(os.environ.get(tally.TALLY_ENV, ""))
    if not path.is_file():
        return
    rows = read(path)
    kinds = collections.Counter(how for _, how in rows)
    by_file = collections.Counter(test.split("::")[0] for test, _ in rows)
    kinds_by_file = collections.Counter((test.split("::")[0], how) for test, how in rows)
    terminalreporter.write_sep("=", f"kernel starts: {len(rows)} ("
                               + ", ".join(f"{n} {how}" for how, n in sorted(kinds.items())) + ")")
    for name, count in by_file.most_common(12):
        split = ", ".join(f"{kinds_by_file[name, how]} {how}" for how in sorted(kinds) if kinds_by_file[name, how])
        terminalreporter.write_line(f"{count:5d}  {name} ({split})")
    for own in _OWN_FILE:
        own.unlink(missing_ok=True)
