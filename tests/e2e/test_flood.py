"""A cell that prints without end ends `output-limit` on any machine, under any load.

The flood writes to stdout as fast as the interpreter can while two other processes keep both
cores busy, and the memory cap is low: if the kernel's unsent output could grow until that cap,
the status would be `memory-limit`, depending on how fast the grader drains it. The kernel's own
per-cell cap (autograder.kernel.outputcap) stops the cell first. The rest of the notebook is
graded, and the honest neighbour keeps full marks.

The load is on while the flooding kernel runs: the flood announces itself in its runtime folder and waits
for this test's two busy processes, which spin until that kernel's folder is gone.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
import pytest

from autograder import course

import coursekit as kit
from test_grading import ensure_bubblewrap

LESSON = "01_tensors_and_views"
FLOOD = ("def linear_forward(x, weight, bias):\n    import os, sys, time\n"
         "    runtime = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])\n"
         "    open(os.path.join(runtime, 'flood-starts'), 'w').close()\n"
         "    for _ in range(1200):   # until the test's two busy processes run (at most a minute)\n"
         "        if os.path.exists(os.path.join(runtime, 'loaded')):\n            break\n"
         "        time.sleep(0.05)\n"
         "    chunk = 'x' * 5_000_000\n"
         "    while True:\n        sys.stdout.write(chunk)\n")
HOG = "import os, sys\nwhile os.path.isdir(sys.argv[1]):\n    pass\n"   # busy until the flood's kernel is gone


def load_when_flooding(scratch: Path, stop: threading.Event, hogs: list) -> None:
    """Once the flood says it starts: two busy processes, then the word to go ("loaded" beside its flag)."""
    while not hogs and not stop.wait(0.05):
        for flag in scratch.glob("*/nb-*/run/flood-starts"):
            hogs += [subprocess.Popen([sys.executable, "-c", HOG, str(flag.parent)]) for _ in range(2)]
            (flag.parent / "loaded").touch()
            break


@pytest.fixture(scope="module")
def flooded(tmp_path_factory):
    assert ensure_bubblewrap(), "bubblewrap must work here"
    base = tmp_path_factory.mktemp("flood")
    root = kit.make_scratch_course(base / "course", [LESSON])
    release_nb = kit.release_notebook(root, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    kit.submit(root, "flood", LESSON, kit.fill_answers(release_nb, solution_nb, {"linear_forward": FLOOD}))
    kit.submit(root, "honest", LESSON, kit.fill_answers(release_nb, solution_nb))
    scratch = Path(tempfile.mkdtemp(prefix="pte-flood-"))   # short: the kernels' sockets lie under it
    stop, hogs = threading.Event(), []
    watcher = threading.Thread(target=load_when_flooding, args=(scratch, stop, hogs), daemon=True)
    watcher.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2",
                               "--timeout-s", "120", "--cell-timeout-s", "60", "--memory-mb", "700",
                               "--output-mb", "1"], capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, PTE_SCRATCH=str(scratch)))
    finally:
        stop.set()
        watcher.join()
        for hog in hogs:
            hog.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    assert len(hogs) == 2, f"the flood never said it starts: no load was put on\n{proc.stderr[-2000:]}"
    report = json.loads((root / "grading-report.json").read_text())
    return root, proc, {r["student"]: r for r in report["submissions"]}


def test_flood_ends_output_limit_under_load(flooded):
    root, proc, results = flooded
    assert results["flood"]["status"] == "output-limit", (results["flood"], proc.stderr[-2000:])
    scores = kit.scores(root, LESSON)
    assert scores["flood"] == {"shares_storage": 2.0, "flatten_features": 2.0, "independent_copy": 2.0,
                               "to_class_labels": 2.0, "linear_forward": 0.0}


def test_neighbour_of_a_flood_keeps_full_marks(flooded):
    root, _, results = flooded
    assert results["honest"]["status"] == "graded"
    assert sum(kit.scores(root, LESSON)["honest"].values()) == 10.0
