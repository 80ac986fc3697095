"""The demo hub's folders, as a student's terminal sees them: the course (solutions, gradebook, reference cache,
the feedback service's state) and the HTTP exchange's store are refused to a student (deploy/jupyterhub/demo.py).

``demo.py --prepare-only`` in a temporary folder with lesson 01, as root (each demo user a Unix user), then
``cat`` and ``ls`` run as the student's uid, with no supplementary group, on each of them: each must print
"Permission denied". tests/e2e/test_hub.py runs the same check on a running hub, after the service graded (its
queue and the reference cache then exist too).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import coursekit as kit

LESSON = "01_tensors_and_views"
STUDENT = "pte-ann"


def student_reads(user: str, paths: list[Path]) -> dict[str, str]:
    """What ``cat`` (a file) or ``ls`` (a folder) printed when run as ``user``'s uid, per path; each path must
    exist (seen as root), so a refusal is not a missing file."""
    entry = pwd.getpwnam(user)
    printed = {}
    for path in paths:
        assert path.exists(), f"{path} does not exist: nothing to refuse"
        cmd = ["ls", "-la", str(path)] if path.is_dir() else ["cat", str(path)]
        done = subprocess.run(cmd, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], capture_output=True,
                              text=True, errors="replace", cwd="/", env={"PATH": "/usr/bin:/bin", "HOME": "/"},
                              timeout=60)
        printed[f"$ {' '.join(cmd)}"] = f"(exit {done.returncode}) {done.stderr.strip() or done.stdout[:200]}"
    return printed


def assert_refused(printed: dict[str, str]) -> None:
    readable = {cmd: out for cmd, out in printed.items() if "Permission denied" not in out or "(exit 0)" in out}
    assert not readable, "a student read these:\n" + "\n".join(f"{c}\n  {o}" for c, o in readable.items())


def private_paths(state: Path) -> list[Path]:
    """What no student may read in the demo's folder (those that exist at this point)."""
    settings = json.loads((state / "hub.json").read_text())
    course = Path(settings["course"])
    paths = [course, course / "solutions" / LESSON / f"{LESSON}.ipynb", course / "gradebook.db",
             course / "nbgrader_config.py", Path(settings["service_exchange"]), Path(settings["inbound"]),
             state / "service"]
    service = course / ".grading" / "feedback-service"
    paths += [p for p in (course / ".grading" / "reference-cache", service, service / "queue.sqlite")
              if p.exists()]
    return paths


@pytest.mark.skipif(os.geteuid() != 0, reason="the demo's Unix users are made as root only")
def test_a_students_terminal_is_refused_the_course_and_the_exchange():
    state = Path(tempfile.mkdtemp(prefix="pte-hub-perms-"))
    state.chmod(0o755)
    try:
        done = subprocess.run([sys.executable, str(kit.REPO / "deploy" / "jupyterhub" / "demo.py"), "--state",
                               str(state), "--lessons", LESSON, "--prepare-only"], capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        settings = json.loads((state / "hub.json").read_text())
        if not settings["own_unix_users"]:   # a checkout in a private folder: every server runs as root
            pytest.skip(f"the demo gives no user a Unix user of their own here: {settings['why_shared']}")
        printed = student_reads(STUDENT, private_paths(state))
        print("\n".join(f"{cmd}\n  {out}" for cmd, out in printed.items()))
        assert_refused(printed)
        # and the student still reaches what is theirs: their home
        assert "(exit 0)" in student_reads(STUDENT, [state / "home" / STUDENT])[f"$ ls -la {state / 'home' / STUDENT}"]
    finally:
        shutil.rmtree(state, ignore_errors=True)
