"""Warm kernels against cold ones and against nbgrader, and where a notebook's grading time goes.

    python -m bench.bench_warm_grading [--students 12] [--jobs 2] [--lessons 01_tensors_and_views 04_training_loop]
                                       [--class-size 300]          (make bench-grading runs it after bench_grading)

For each lesson, one class of --students honest submissions is graded three ways, side by side in one run:
serial ``nbgrader autograde``, ``python -m autograder grade --kernels cold`` and ``--kernels warm``, each at
--jobs. Printed: the three wall times and their ratios (targets: warm / nbgrader at most 0.35 for lesson 04
and 0.25 for lesson 01); the floor, the notebooks' own execution (their cells, start-up left out, summed
over the warm run) divided by --jobs, and warm / floor (target at most 1.2); per notebook and summed, where
the time went (the kernel's start, the first cell with the imports, other cells, cells drawing figures,
test cells, their hidden parts, and the grader's own work: building the canonical notebook, the sandbox,
judging, staging), from the grading report's ``timings``; and the run's work outside the notebooks
(planning, the solution's reference run, recording in the gradebook).

``--class-size N``: N submissions of the last lesson (honest, noisy and wrong, mixed), graded warm and cold:
the time, the ratio to the floor and the grader's peak memory (templates counted, kernels not).

Figures are printed, never asserted: machines differ, and this one's speed drifts within minutes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import course
from bench.bench_grading import PEAK, timed
from tests.support import coursekit as kit

PARTS = ("start", "setup", "cells", "figures", "tests", "hidden")


def honest_class(root: Path, lesson: str, students: int, mixed: bool = False) -> Path:
    """``students`` submissions of ``lesson``; ``mixed``: honest, noisy (prints and warns) and wrong in turn."""
    kit.make_scratch_course(root, [lesson])
    release = kit.release_notebook(root, lesson)
    solution = nbformat.read(course.solution_path(lesson), as_version=4)
    honest = kit.fill_answers(release, solution)
    noisy = nbformat.from_dict(json.loads(json.dumps(honest)))
    for cell in noisy.cells:
        if cell.cell_type == "code" and "grade_id" in cell.metadata.get("nbgrader", {}) and \
                cell.metadata["nbgrader"].get("solution"):
            cell.source += "\nimport warnings as _w\nprint('debugging')\n_w.warn('a student warning')"
    for i in range(students):
        nb = honest if not mixed or i % 3 == 0 else noisy if i % 3 == 1 else release
        kit.submit(root, f"student{i:03d}", lesson, nb)
    return root


def grade(root: Path, kernels: str, jobs: int) -> tuple[float, dict]:
    seconds = timed([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", str(jobs),
                     "--kernels", kernels], root)
    return seconds, json.loads((root / "grading-report.json").read_text())


def breakdown(report: dict) -> dict[str, float]:
    """Summed over the class: each part of PARTS, and the grader's own work per notebook."""
    subs = report["submissions"]
    total = {part: sum(s["timings"].get(part, 0.0) for s in subs) for part in PARTS}
    total["wait"] = sum(s["timings"].get("reference_wait", 0.0) for s in subs)
    total["grader"] = sum(s["seconds"] - s["timings"].get("start", 0.0) - s["execution_seconds"]
                          - s["timings"].get("reference_wait", 0.0) for s in subs)
    total["notebooks"] = sum(s["seconds"] for s in subs)
    return total


def print_breakdown(name: str, report: dict, wall: float, jobs: int) -> None:
    parts = breakdown(report)
    count = len(report["submissions"])
    kinds = sorted({s["kernel_start"] or "none" for s in report["submissions"]})
    print(f"  {name}: where the time went (kernels {', '.join(kinds)}), summed over {count} notebooks "
          f"(per notebook in brackets):")
    labels = {"start": "kernel start", "setup": "first cell (imports)", "cells": "other cells",
              "figures": "cells drawing figures", "tests": "test cells, visible part", "hidden": "hidden parts",
              "grader": "grader's own work", "wait": "waiting for the reference"}
    for key, label in labels.items():
        print(f"    {label:28s} {parts[key]:7.1f} s  ({parts[key] / count:5.2f} s)")
    outside = wall - parts["notebooks"] / jobs
    print(f"    {'outside the notebooks':28s} {outside:7.1f} s of wall time (planning, the reference run, recording)")


def compare(work: Path, lesson: str, students: int, jobs: int) -> None:
    base = honest_class(work / f"class-{lesson}", lesson, students)
    roots = {name: work / f"{name}-{lesson}" for name in ("nbgrader", "cold", "warm")}
    for root in roots.values():
        shutil.copytree(base, root)
    times, reports = {}, {}
    times["nbgrader"] = timed(course.nbgrader_cmd("autograde", lesson, "--force", "--log-level=ERROR"),
                              roots["nbgrader"])
    peaks = {}
    for kernels in ("cold", "warm"):
        times[kernels], reports[kernels] = grade(roots[kernels], kernels, jobs)
        peaks[kernels] = PEAK["grader_mb"]
    floor = sum(s["execution_seconds"] for s in reports["warm"]["submissions"]) / jobs
    statuses = {k: sorted({s["status"] for s in r["submissions"]}) for k, r in reports.items()}
    print(f"{lesson}, {students} honest submissions, --jobs {jobs}: "
          f"serial nbgrader autograde {times['nbgrader']:.1f} s; "
          f"grade --kernels cold {times['cold']:.1f} s; --kernels warm {times['warm']:.1f} s (statuses {statuses})")
    print(f"  warm / nbgrader {times['warm'] / times['nbgrader']:.2f} (target <= "
          f"{'0.25' if lesson.startswith('01') else '0.35'}); warm / cold {times['warm'] / times['cold']:.2f}; "
          f"cold / nbgrader {times['cold'] / times['nbgrader']:.2f}")
    print(f"  floor (the warm notebooks' own execution / {jobs}) {floor:.1f} s; warm / floor "
          f"{times['warm'] / floor:.2f} (target <= 1.2)")
    starts = sorted(s["timings"].get("start", 0.0) for s in reports["warm"]["submissions"])
    print(f"  warm kernel start in the grader (asked for -> answering): median {starts[len(starts) // 2]:.2f} s, "
          f"first {starts[-1]:.2f} s; grader's peak memory: cold {peaks['cold']:.0f} MB, warm (templates counted) "
          f"{peaks['warm']:.0f} MB")
    for kernels in ("cold", "warm"):
        print_breakdown(kernels, reports[kernels], times[kernels], jobs)


def first_cell_latency(rounds: int = 5) -> None:
    """From "kernel wanted" to the first cell's reply, with torch and matplotlib imported, cold and warm: with
    jupyter_client's own client (which waits for 0.2 s of IOPub silence once the kernel answers) and with the
    grading command's (``kernel_client.ReadyClient``)."""
    script = ("import asyncio, sys, time\nfrom jupyter_client.manager import AsyncKernelManager\n"
              "async def main(name, client):\n"
              "    for _ in range(%d):\n"
              "        t = time.perf_counter()\n"
              "        km = AsyncKernelManager(kernel_name=name, client_class=client)\n"
              "        await km.start_kernel()\n"
              "        kc = km.client()\n"
              "        kc.start_channels()\n"
              "        await kc.wait_for_ready(timeout=120)\n"
              "        await kc.execute_interactive('import torch, matplotlib.pyplot', timeout=120)\n"
              "        print(round(time.perf_counter() - t, 3), flush=True)\n"
              "        kc.stop_channels()\n"
              "        await km.shutdown_kernel(now=True)\n"
              "asyncio.run(main(*sys.argv[1:]))\n" % rounds)
    clients = {"jupyter_client's client": "jupyter_client.asynchronous.AsyncKernelClient",
               "the grader's client": "autograder.grading.run.kernel_client.ReadyClient"}
    for name in ("python3", "pte-warm"):
        for label, client in clients.items():
            done = subprocess.run([sys.executable, "-c", script, name, client], capture_output=True, text=True,
                                  timeout=900)
            values = [float(v) for v in done.stdout.split()]
            print(f"kernel wanted -> first cell ran (torch and matplotlib imported), {name}, {label}: "
                  f"{', '.join(f'{v:.2f}' for v in values)} s (the first warm one imports the template)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--lessons", nargs="*", default=["01_tensors_and_views", "04_training_loop"])
    parser.add_argument("--class-size", type=int, default=0, help="the mixed class of the last lesson (0: skip)")
    parser.add_argument("--scale-kernels", nargs="+", default=["warm", "cold"], choices=["warm", "cold"],
                        help="the class-size run's kernels")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the bench's folder and print its path")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pte-bench-warm-"))
    try:
        first_cell_latency()
        if not args.skip_compare:
            for lesson in args.lessons:
                compare(work, lesson, args.students, args.jobs)
        if args.class_size:
            lesson = args.lessons[-1]
            base = honest_class(work / "scale", lesson, args.class_size, mixed=True)
            for kernels in args.scale_kernels:
                root = work / f"scale-{kernels}"
                shutil.copytree(base, root)
                started = time.perf_counter()
                wall, report = grade(root, kernels, args.jobs)
                floor = sum(s["execution_seconds"] for s in report["submissions"]) / args.jobs
                counts = {}
                for entry in report["submissions"]:
                    counts[entry["status"]] = counts.get(entry["status"], 0) + 1
                statuses = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
                for entry in [e for e in report["submissions"] if e["status"] != "graded"][:5]:
                    print(f"  not graded: {entry['student']}: {entry['status']}: {entry['reason'][:300]}")
                print(f"class of {args.class_size} submissions of {lesson} (honest, noisy, wrong), "
                      f"--kernels {kernels}, "
                      f"--jobs {args.jobs}: {wall:.1f} s ({wall / args.class_size:.2f} s each), floor {floor:.1f} s, "
                      f"ratio {wall / floor:.2f}; grader's peak memory {PEAK['grader_mb']:.0f} MB; statuses: "
                      f"{statuses} ({time.perf_counter() - started:.0f} s)", flush=True)
                print_breakdown(kernels, report, wall, args.jobs)
    finally:
        if args.keep:
            print(f"the bench's folder is kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
