"""Grade one synthetic class twice: plain serial `nbgrader autograde`, then `python -m autograder grade`.

    python -m bench.bench_grading [--students 20] [--jobs 2] [--lessons ID ...]   (make bench-grading)

Half the students submit the solutions, half the untouched release. Prints both wall
times, their ratio (the target is at most 0.55 with 2 jobs on 2 cores) in each of --rounds
rounds and its median (this machine's speed drifts by tens of percent within minutes, so
the two are timed side by side, round after round), the grader's own peak
memory (the command and its worker processes, kernels left out), a class-scale run (--class-size
submissions of the lesson slowest to grade), and the per-notebook overhead at --jobs 1:
its wall time minus the notebooks' own execution time (measured inside each kernel,
from the first cell to the last), divided by the number of notebooks. Kernel start-up,
sandboxing, rebuilding the notebook, recording in the gradebook and feedback HTML are
all overhead by this measure.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import course
from tests.support import coursekit as kit  # python -m bench.bench_grading, from the course root


def build_class(root: Path, lessons: list[str], students: int) -> Path:
    kit.make_scratch_course(root, lessons)
    for lesson in lessons:
        release_nb = kit.release_notebook(root, lesson)
        solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
        for i in range(students):
            nb = kit.fill_answers(release_nb, solution_nb) if i % 2 == 0 else release_nb
            kit.submit(root, f"student{i:03d}", lesson, nb)
    return root


PEAK = {"grader_mb": 0.0}
TEMPLATE = "autograder.warm.template"


def timed(cmd: list[str], cwd: Path) -> float:
    """Wall time of ``cmd``; the peak resident memory of its process tree without the kernels goes to PEAK."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0.0
    while proc.poll() is None:
        try:
            tree = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
            rss = 0
            for p in tree:
                try:
                    line = " ".join(p.cmdline())
                    if TEMPLATE in line:   # a template counts; what it forks (kernels, their sandboxes) does not
                        if TEMPLATE not in " ".join(p.parent().cmdline()):
                            rss += p.memory_info().rss
                    elif "ipykernel" not in line and "bwrap" not in line and "prlimit" not in line:
                        rss += p.memory_info().rss
                except psutil.Error:
                    pass
            peak = max(peak, rss / 2**20)
        except psutil.Error:
            pass
        time.sleep(0.5)   # each look reads every process's command line: cheap, but not free
    PEAK["grader_mb"] = peak
    return time.perf_counter() - start


HOG = ("import multiprocessing as _mp\n"
       "def _spin():\n    while True:\n        pass\n"
       "for _ in range(4):\n    _mp.get_context('fork').Process(target=_spin, daemon=True).start()\n")


def neighbour_seconds(work: Path, lesson: str, with_hog: bool, jobs: int) -> float:
    """The honest student's execution time when graded beside a CPU hog (or beside another honest one)."""
    root = work / f"hog-{with_hog}"
    kit.make_scratch_course(root, [lesson])
    release_nb = kit.release_notebook(root, lesson)
    solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
    honest = kit.fill_answers(release_nb, solution_nb)
    kit.submit(root, "a-honest", lesson, honest)
    other = nbformat.from_dict(honest)
    if with_hog:
        setup = next(c for c in other.cells if c.cell_type == "code")
        setup.source += "\n" + HOG
    kit.submit(root, "b-other", lesson, other)
    timed([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", str(jobs),
           "--cell-timeout-s", "300"], root)
    report = json.loads((root / "grading-report.json").read_text())
    return next(s["execution_seconds"] for s in report["submissions"] if s["student"] == "a-honest")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3,
                        help="serial nbgrader and the grading command, one after the other, this many times")
    parser.add_argument("--lessons", nargs="*", default=None)
    parser.add_argument("--hog-only", action="store_true", help="only the CPU-hog neighbour measurement")
    parser.add_argument("--class-size", type=int, default=40,
                        help="submissions in the class-scale run of the slowest lesson (0: skip it)")
    parser.add_argument("--slowest", default="04_training_loop", help="the lesson slowest to grade")
    args = parser.parse_args()
    lessons = args.lessons or course.lessons()
    work = Path(tempfile.mkdtemp(prefix="pte-bench-"))
    try:
        quiet = neighbour_seconds(work, lessons[0], False, args.jobs)
        noisy = neighbour_seconds(work, lessons[0], True, args.jobs)
        print(f"honest neighbour's execution, {lessons[0]}, --jobs {args.jobs}: beside an honest student "
              f"{quiet:.1f} s, beside a 4-process CPU hog {noisy:.1f} s", flush=True)
        if args.hog_only:
            return 0
        class_root = build_class(work / "class", lessons, args.students)
        notebooks = len(lessons) * args.students
        print(f"class: {args.students} students x {len(lessons)} lessons = {notebooks} notebooks", flush=True)
        ratios, peak = [], 0.0
        for round_ in range(1, args.rounds + 1):   # side by side, so that the machine's drift cancels out
            serial_root, ours_root = work / f"serial-{round_}", work / f"ours-{round_}"
            shutil.copytree(class_root, serial_root)
            shutil.copytree(class_root, ours_root)
            times = {}
            for which in (("serial", "ours") if round_ % 2 else ("ours", "serial")):   # which goes first alternates
                times[which] = (sum(timed(course.nbgrader_cmd("autograde", lesson, "--force", "--log-level=ERROR"),
                                          serial_root) for lesson in lessons) if which == "serial" else
                                timed([sys.executable, "-m", "autograder", "grade", "--course", str(ours_root),
                                       "--jobs", str(args.jobs)], ours_root))
                peak = PEAK["grader_mb"] if which == "ours" else peak
            serial, ours = times["serial"], times["ours"]
            ratios.append(ours / serial)
            print(f"round {round_}: nbgrader autograde, serial {serial:6.1f} s; autograder grade --jobs {args.jobs} "
                  f"{ours:6.1f} s = {ours / serial:.2f}x; grader's own peak memory {peak:.0f} MB",
                  flush=True)
        print(f"autograder grade --jobs {args.jobs} against serial nbgrader: median {statistics.median(ratios):.2f}x "
              f"over {len(ratios)} rounds (each {', '.join(f'{r:.2f}' for r in ratios)}; target <= 0.55)", flush=True)
        if args.class_size:
            scale_root = build_class(work / "scale", [args.slowest], args.class_size)
            scale = timed([sys.executable, "-m", "autograder", "grade", "--course", str(scale_root),
                           "--jobs", str(args.jobs)], scale_root)
            report = json.loads((scale_root / "grading-report.json").read_text())
            statuses = sorted({s["status"] for s in report["submissions"]})
            print(f"class scale: {args.class_size} submissions of {args.slowest}, --jobs {args.jobs}: {scale:.1f} s "
                  f"({scale / args.class_size:.1f} s each; statuses: {', '.join(statuses)}); grader's own peak "
                  f"memory {PEAK['grader_mb']:.0f} MB", flush=True)

        solo_root = work / "solo"
        shutil.copytree(class_root, solo_root)
        solo = timed([sys.executable, "-m", "autograder", "grade", "--course", str(solo_root), "--jobs", "1"],
                     solo_root)
        report = json.loads((solo_root / "grading-report.json").read_text())
        statuses = sorted({s["status"] for s in report["submissions"]})
        executing = sum(s["execution_seconds"] for s in report["submissions"])
        print(f"autograder grade --jobs 1:            {solo:8.1f} s   (statuses: {', '.join(statuses)})")
        print(f"notebooks' own execution, in total:   {executing:8.1f} s")
        print(f"overhead per notebook at --jobs 1:    {(solo - executing) / notebooks:8.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
