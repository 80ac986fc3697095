"""Render the class report of a synthetic class: --students graded submissions of each of --lessons, each
with the checks of that lesson's reference (random outcomes, seeded) and up to four feedback attempts.

    python -m bench.bench_report [--students 300] [--lessons 01_tensors_and_views] [--rounds 3]   (make bench-report)

Prints, per round, the wall and CPU seconds ``python -m autograder report`` takes in this process (reading the reports,
counting, drawing, writing the page and the CSV files) and their median; the target is under 5 s for 300
submissions on 2 cores. The records are synthesised (``GradingReport`` messages as the grading command writes
them), so no kernel runs.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from autograder import classreport, course
from autograder.classreport import data
from autograder.grading.messages import CheckResult, GradingReport, NotebookResult, PredictionRead
from autograder.grading.report import reporting
from autograder.kernel.vocabulary import protocol

FAILURES = ["values", "dtype", "shape", "exception", "timeout"]


def _checks(rng: random.Random, reference: dict, skill: float) -> tuple[list[CheckResult], dict[str, float]]:
    checks, verdicts = [], {}
    for grade_id, entries in reference.items():
        checks.append(CheckResult(grade_id, "visible", 0, 0, "passed"))
        ok = True
        for number, entry in enumerate(entries, 1):
            if not ok or rng.random() < skill:
                status = "not-run" if not ok else "passed"
                checks.append(CheckResult(grade_id, "hidden", number, len(entries), status,
                                          "not-run" if not ok else "", "", entry.get("hint") or ""))
                continue
            failure = rng.choice(FAILURES)
            status = "error" if failure == "exception" else "timeout" if failure == "timeout" else "failed"
            checks.append(CheckResult(grade_id, "hidden", number, len(entries), status, failure,
                                      "KeyError" if failure == "exception" else "", entry.get("hint") or ""))
            ok = False
        verdicts[grade_id] = 1.0 if ok else 0.0
    return checks, verdicts


def synthetic_course(root: Path, lessons: list[str], students: int, seed: int = 0) -> Path:
    """A course folder whose solutions are the repository's and whose reports are synthetic."""
    rng = random.Random(seed)
    (root / "solutions").mkdir(parents=True)
    finals, runs = [], {}
    for lesson in lessons:
        (root / "solutions" / lesson).symlink_to(course.solution_path(lesson).parent)
        reference = protocol.Reference.read(course.solution_path(lesson).parent / protocol.REFERENCE_FILE).cells
        solution = data.read_lesson(root, lesson, {lesson})
        for i in range(students):
            skill = 0.55 + 0.4 * rng.random()
            for attempt in range(rng.randint(1, 4)):
                checks, verdicts = _checks(rng, reference, min(skill + 0.1 * attempt, 0.99))
                verdicts = {g: solution.points.get(g, 0.0) * v for g, v in verdicts.items()}
                guesses = [PredictionRead(pid, str(spec.get("kind")), "answered", spec.get("answer"))
                           for pid, spec in solution.answers.items()]
                result = NotebookResult(f"student-{i:04d}", lesson, lesson, score=sum(verdicts.values()),
                                        max_score=sum(solution.points.values()), verdicts=verdicts, checks=checks,
                                        predictions=guesses)
                runs.setdefault(attempt, []).append(result)
            finals.append(result)
    GradingReport(str(root), False, finals).write(root / data.REPORT)
    folder = root / data.FEEDBACK_COURSE
    for _, results in sorted(runs.items()):   # a run per attempt: the layout the service's runs leave
        reporting.keep_run(folder, GradingReport(str(folder), True, results))
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--lessons", nargs="+", default=["01_tensors_and_views"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pte-bench-report-") as scratch:
        root = synthetic_course(Path(scratch), args.lessons, args.students)
        times, cpu = [], []
        for number in range(1, args.rounds + 1):
            began, began_cpu = time.perf_counter(), time.process_time()
            written = classreport.write(root, min_group=5)
            times.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
            size = written["page"].stat().st_size
            print(f"round {number}: {times[-1]:.2f} s wall, {cpu[-1]:.2f} s CPU for "
                  f"{args.students * len(args.lessons)} graded submissions ({len(args.lessons)} lesson(s)); "
                  f"page {size / 1024:.0f} KiB", flush=True)
        print(f"median: {statistics.median(times):.2f} s wall, {statistics.median(cpu):.2f} s CPU (target < 5 s "
              f"on 2 cores; the CPU time is what a busy machine's wall time hides); load average "
              f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
