"""``python -m autograder grade``: argument parsing and exit codes (0 all graded, 3 some not, 2 bad arguments).

Every option left out takes the course's ``nbgrader_config.py`` value, else the default in ``settings.py``.
"""
from __future__ import annotations

from pathlib import Path

from autograder.grading.plan import shards
from autograder.grading.plan.settings import default


def add_parser(commands) -> None:
    grade = commands.add_parser(
        "grade", help="autograde a class in parallel, sandboxed, with per-submission limits",
        description="Grade DIR/submitted/<student>/<assignment>/*.ipynb with the course's nbgrader_config.py; "
                    "write DIR/autograded, DIR/feedback, DIR/grades.csv and DIR/grading-report.json. Options "
                    "not given come from the course config (c.Execute.timeout, c.PTEGrading.<name>), else from "
                    "the defaults shown.")
    grade.add_argument("--course", required=True, type=Path, help="the nbgrader course folder")
    grade.add_argument("--assignment", action="append", dest="assignments", metavar="ID",
                       help="grade only this assignment (repeatable)")
    grade.add_argument("--student", action="append", dest="students", metavar="ID",
                       help="grade only this student (repeatable)")
    numbers = [("--jobs", int, "students graded at once (default: cores, %s here)"),
               ("--timeout-s", float, "wall-clock cap per notebook (default %s)"),
               ("--cell-timeout-s", float, "cap per cell (default: the course's Execute.timeout, at most the "
                                           "notebook's cap)"),
               ("--memory-mb", int, "memory cap per kernel (default %s)"),
               ("--output-mb", float, "output cap per notebook (default %s)"),
               ("--disk-mb", int, "size of each tmpfs a kernel writes: work folder, /tmp, runtime (default %s)"),
               ("--processes", int, "processes and threads per kernel (default %s)"),
               ("--threads", int, "BLAS/OpenMP threads per kernel (default: c.PTEGrading.kernel_threads, else %s)")]
    for flag, kind, text in numbers:
        name = flag[2:].replace("-", "_")
        grade.add_argument(flag, type=kind, default=None, help=text.replace("%s", str(default(name))))
    grade.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default=None,
                       help="bubblewrap isolation (default auto: required; refuses to grade without it). "
                            "'none' grades without isolation, knowingly")
    grade.add_argument("--kernels", choices=["warm", "cold"], default=None,
                       help="warm (default): fork each kernel, sandboxed, from a template that has imported torch; "
                            "cold: start each kernel as a new Python")
    grade.add_argument("--shard", default=None, metavar="I/N|auto",
                       help="grade only students whose id hashes to shard I of N (several graders, one database); "
                            "auto: the shard of this Slurm array task or Kubernetes Indexed Job pod")
    grade.add_argument("--shard-count", type=int, default=None, metavar="N",
                       help="how many shards --shard auto splits the class into (needed under Kubernetes, which "
                            "does not tell a pod; default: c.PTEGrading.shard_count)")


OVERRIDES = ("assignments", "students", "jobs", "timeout_s", "cell_timeout_s", "memory_mb", "output_mb", "disk_mb",
             "processes", "threads", "sandbox", "shard_count", "kernels")


def run(args, parser) -> int:
    from autograder.grading.run import worker

    worker.forkserver()   # the grading workers' server imports while this process imports the rest
    from autograder.grading.pipeline import (  # the Jupyter packages load here, once a grade is asked for
        UsageError,
        grade,
    )

    overrides = {name: getattr(args, name) for name in OVERRIDES}
    if args.shard:
        try:
            overrides["shard"] = shards.parse(args.shard)   # "auto" is read once the course config is
        except ValueError as exc:
            parser.error(str(exc))
    try:
        code, _ = grade(args.course, overrides)
    except UsageError as exc:
        parser.error(str(exc))
    return code
