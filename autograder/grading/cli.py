"""``python -m autograder grade``: argument parsing and exit codes (0 all graded, 3 some not, 2 bad arguments)."""
from __future__ import annotations

import os
from pathlib import Path


def add_parser(commands) -> None:
    grade = commands.add_parser(
        "grade", help="autograde a class in parallel, sandboxed, with per-submission limits",
        description="Grade DIR/submitted/<student>/<assignment>/*.ipynb with the course's nbgrader_config.py; "
                    "write DIR/autograded, DIR/feedback, DIR/grades.csv and DIR/grading-report.json.")
    grade.add_argument("--course", required=True, type=Path, help="the nbgrader course folder")
    grade.add_argument("--assignment", action="append", help="grade only this assignment (repeatable)")
    grade.add_argument("--student", action="append", help="grade only this student (repeatable)")
    grade.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="students graded at once (default: cores)")
    grade.add_argument("--timeout-s", type=float, default=600.0, help="wall-clock cap per notebook (default 600)")
    grade.add_argument("--cell-timeout-s", type=float, default=None, help="cap per cell (default min(120, timeout))")
    grade.add_argument("--memory-mb", type=int, default=3072, help="memory cap per notebook (default 3072)")
    grade.add_argument("--output-mb", type=float, default=2.0, help="output cap per notebook (default 2)")
    grade.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                       help="bubblewrap isolation (default auto: required; refuses to grade without it). "
                            "'none' grades without isolation, knowingly")
    grade.add_argument("--shard", default=None, metavar="I/N",
                       help="grade only students whose id hashes to shard I of N (several graders, one database)")


def run(args, parser) -> int:
    from .pipeline import Options, UsageError, grade

    shard = None
    if args.shard:
        try:
            index, count = (int(x) for x in args.shard.split("/"))
            if not 0 <= index < count:
                raise ValueError
            shard = (index, count)
        except ValueError:
            parser.error(f"--shard wants I/N with 0 <= I < N, got {args.shard!r}")
    options = Options(course=args.course, assignments=args.assignment, students=args.student, jobs=args.jobs,
                      timeout_s=args.timeout_s, cell_timeout_s=args.cell_timeout_s, memory_mb=args.memory_mb,
                      output_mb=args.output_mb, sandbox=args.sandbox, shard=shard)
    try:
        code, _ = grade(options)
    except UsageError as exc:
        parser.error(str(exc))
    return code
