"""The process cap of a sandbox is its own, when the grader runs as root and when it does not.

As root, each kernel's cgroup has its own ``pids.max`` (the grading tests cover it). Here, a grader that
is not root, as uid 65534 would run it: the sandbox's command line (``sandbox.command_prefix``) sets
RLIMIT_NPROC inside the sandbox's own user namespace, so two sandboxes of 40 processes each both fit
under a cap of 50 (a per-user cap would stop them at 50 together), and one of 80 stops at the cap: the three
run at once, under one non-root grader.

The non-root grader is given what it runs in a folder it may enter (``grader_site``): a copy of the
packages its script imports, run by the base interpreter. It never reads the checkout or its venv, so
the tests hold wherever the clone lives (under ``/root``, in a private temporary folder: see
``test_a_private_clone_passes_these_tests``).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from autograder import course

IMPORTS = "autograder.grading.isolate.sandbox", "autograder.grading.plan.settings"

FORKS = """
import os, sys, time
made = 0
try:
    for _ in range(int(sys.argv[1])):
        if os.fork() == 0:
            time.sleep(4)
            os._exit(0)
        made += 1
except OSError:
    pass
print(made, flush=True)
time.sleep(4.5)
"""

AS_GRADER = """
import json, subprocess, sys
from pathlib import Path
from autograder.grading.isolate import sandbox
from autograder.grading.plan import settings
base = Path(sys.argv[1])
assert "site" in Path(sandbox.__file__).parts, sandbox.__file__   # the copy, never the checkout
limits = settings.Settings(course=base, cell_timeout_s=60).limits()   # no nbgrader config to read
limits.processes = 50
runs = []
for count in sys.argv[2:]:
    work, runtime = sandbox.prepare_dirs(base / f"job-{len(runs)}")
    prefix = sandbox.command_prefix(work, runtime, limits)
    # the system's Python: the grader's own interpreter may live where uid 65534 may not enter
    runs.append(subprocess.Popen(prefix + ["/usr/bin/python3", "-c", (base / "forks.py").read_text(), count],
                                 stdout=subprocess.PIPE, text=True))
print(json.dumps([int(run.communicate()[0].split()[-1]) for run in runs]))
"""


PROBE = """
import json, sys, sysconfig
from pathlib import Path
for name in sys.argv[1:]:
    __import__(name)
stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
roots = set()
for name, module in list(sys.modules.items()):
    where = getattr(module, "__file__", None)
    if not where or "." in name:
        continue
    where = Path(where).resolve()
    if stdlib in where.parents and "site-packages" not in where.parts:
        continue
    roots.add(str(where.parent if where.name == "__init__.py" else where))
print(json.dumps(sorted(roots)))
"""


def grader_site(base: Path) -> Path:
    """A copy, in ``base/site``, of every package outside the standard library that the grader's script imports
    (``autograder`` and what it needs): uid 65534 may not be able to enter the checkout or its venv."""
    found = subprocess.run([sys.executable, "-c", PROBE, *IMPORTS], capture_output=True, text=True, timeout=60,
                           check=True, cwd=course.REPO_ROOT)
    site = base / "site"
    site.mkdir()
    for root in map(Path, json.loads(found.stdout)):
        if root.is_dir():
            shutil.copytree(root, site / root.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(root, site / root.name)
    # autograder.kernel.paths finds the data folder beside the package
    (site / "data").mkdir()
    return site


def made_as_non_root_grader(tmp_path: Path, counts: list[int]) -> list[int]:
    base = tmp_path / "grader"
    base.mkdir()
    (base / "forks.py").write_text(FORKS)
    site = grader_site(base)
    for path in [base, *base.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    # the interpreter behind the venv, with nothing of the venv or the checkout on its path
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-s", "-c",
                           AS_GRADER, str(base), *map(str, counts)], capture_output=True, text=True, timeout=120,
                          cwd=base, env=dict(env, PYTHONPATH=str(site)))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def non_root_grader():
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("bwrap"):
        pytest.fail("this test plays a non-root grader with setpriv from root, and needs bubblewrap "
                    "(tools/system-deps.sh installs it; `make test` runs as root on CI and here)")
    folder = Path(tempfile.mkdtemp(prefix="pte-non-root-"))   # pytest's own tmp is private to root
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_sandboxes_of_a_non_root_grader_each_stop_at_their_own_process_cap(non_root_grader):
    """Three sandboxes at once under a cap of 50: two of 40 both fit (a per-user cap would stop the three at 50
    together), and one of 80 stops at the cap."""
    made = made_as_non_root_grader(non_root_grader, [40, 40, 80])
    assert made[:2] == [40, 40] and 40 <= made[2] < 50, made


def test_a_private_clone_passes_these_tests():
    """The checkout's tracked files (and new ones git does not ignore) copied, as a clone would hold them, into a
    folder only root may enter, its path with spaces in it, with a venv of its own there (one that reaches this
    venv's packages, not its editable install of the course); this file's other tests then run there and pass.
    Before they gave uid 65534 a copy of what it runs, the caps test failed there: the grader's interpreter and
    package lived where uid 65534 may not enter."""
    if os.environ.get("PTE_IN_PRIVATE_CLONE"):
        pytest.skip("already running inside the private clone")
    if not shutil.which("git") or not (course.REPO_ROOT / ".git").exists():
        pytest.fail("this test copies the checkout's files as git lists them, and needs git and a git checkout")
    private = Path(tempfile.mkdtemp(prefix="pte private "))
    try:
        assert private.stat().st_mode & 0o777 == 0o700
        clone = private / "a clone"
        listed = subprocess.run(["git", "-C", str(course.REPO_ROOT), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True, timeout=60).stdout
        for name in filter(None, listed.decode().split("\0")):
            source = course.REPO_ROOT / name
            if source.is_file():
                (clone / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, clone / name)
        venv = clone / ".venv"
        subprocess.run([os.path.realpath(getattr(sys, "_base_executable", sys.executable)), "-m", "venv",
                        "--without-pip", str(venv)], check=True, timeout=120)
        inner = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path"
                                     "('purelib'))"], capture_output=True, text=True, check=True).stdout.strip())
        # a path line: this venv's packages join sys.path, its .pth files (the course's editable install) do not run
        (inner / "outer-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("PYTEST_", "PYTHONPATH", "VIRTUAL_ENV"))}
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-o", "addopts=", "-p", "grouping", "tests/e2e/test_sandbox_limits.py"],
                              cwd=clone, env=dict(env, PTE_IN_PRIVATE_CLONE="1"), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0 and "1 passed, 1 skipped" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    finally:
        shutil.rmtree(private, ignore_errors=True)
