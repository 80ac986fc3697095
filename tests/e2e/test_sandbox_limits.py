"""The process cap of a sandbox is its own, when the grader runs as root and when it does not.

As root, each kernel's cgroup has its own ``pids.max`` (the grading tests cover it). Here, a grader that
is not root, as uid 65534 would run it: the sandbox's command line (``sandbox.command_prefix``) sets
RLIMIT_NPROC inside the sandbox's own user namespace, so two sandboxes of 40 processes each both fit
under a cap of 50 (a per-user cap would stop them at 50 together), and one of 80 stops at the cap.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import course

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
from autograder.grading import sandbox, settings
base = Path(sys.argv[1])
limits = settings.Settings(course=base).limits()
limits.processes = 50
runs = []
for count in sys.argv[2:]:
    work, runtime = sandbox.prepare_dirs(base / f"job-{len(runs)}")
    prefix = sandbox.command_prefix(work, runtime, limits)
    # the system's Python: this machine's venv links into /root, which uid 65534 may not enter
    runs.append(subprocess.Popen(prefix + ["/usr/bin/python3", "-c", (base / "forks.py").read_text(), count],
                                 stdout=subprocess.PIPE, text=True))
print(json.dumps([int(run.communicate()[0].split()[-1]) for run in runs]))
"""


def made_as_non_root_grader(tmp_path: Path, counts: list[int]) -> list[int]:
    base = tmp_path / "grader"
    base.mkdir()
    (base / "forks.py").write_text(FORKS)
    os.chown(base, 65534, 65534)
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                           AS_GRADER, str(base), *map(str, counts)], capture_output=True, text=True, timeout=120,
                          cwd=course.REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(course.REPO_ROOT)))
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


def test_two_sandboxes_of_a_non_root_grader_do_not_share_a_process_cap(non_root_grader):
    assert made_as_non_root_grader(non_root_grader, [40, 40]) == [40, 40]


def test_a_sandbox_of_a_non_root_grader_stops_at_its_process_cap(non_root_grader):
    made = made_as_non_root_grader(non_root_grader, [80])
    assert 40 <= made[0] < 50, made
