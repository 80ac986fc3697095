#!/usr/bin/env python3
"""Grade a class on a Slurm cluster: one array task a shard, then the finishing job.

    python deploy/slurm/submit.py --course /shared/course --shards 8 --throttle 4 --jobs 4 \\
        [--sbatch-arg=--partition=grading --sbatch-arg=--time=02:00:00 ...]

submits ``grade-array.sbatch`` as ``--array=0-7%4 --cpus-per-task=4`` and ``finish.sbatch`` with
``--dependency=afterany:<array>``, and prints both job ids as JSON. Each task's output is
``COURSE/.grading/slurm/grade-<array>_<index>.out``, the finishing job's ``finish-<job>.out``. Shard files
of an earlier run are moved to ``COURSE/.grading/previous/<time>/`` first.

After a task failed or was cancelled: ``scontrol requeue <array>_<index>`` (add ``scontrol update
jobid=<array>_<index> StartTime=now``, since Slurm holds a requeued job for a while), then
``submit.py --course ... --shards 8 --finish-after <array>`` for a new finishing job.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sbatch(args: list[str]) -> str:
    """Submit; return the job id (``--parsable`` prints ``id[;cluster]``)."""
    done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"sbatch {shlex.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def environment(course: Path, shards: int, python: str, grade_args: str, array: str = "") -> str:
    exports = {"PTE_COURSE": str(course), "PTE_SHARDS": str(shards), "PTE_PYTHON": python,
               "PTE_GRADE_ARGS": grade_args, "PTE_ARRAY": array}
    for name, value in exports.items():
        if "," in value:   # sbatch --export splits on commas
            sys.exit(f"{name} may not contain a comma: {value!r}")
    return "--export=ALL," + ",".join(f"{k}={v}" for k, v in exports.items() if v)


def set_aside(course: Path) -> Path | None:
    """Move an earlier run's shard files under .grading/previous/, so the finishing job reads this run's alone
    (a report left from last week would otherwise stand in for a task that dies today)."""
    earlier = sorted(course.glob("grading-report.shard-*-of-*.json")) + sorted(course.glob("grades.shard-*-of-*.csv"))
    if not earlier:
        return None
    folder = course / ".grading" / "previous" / time.strftime("%Y%m%dT%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    for path in earlier:
        path.rename(folder / path.name)
    return folder


def array_spec(shards: int, throttle: int | None) -> str:
    """``0-(N-1)`` with ``%K`` when at most K tasks may run at once."""
    return f"0-{shards - 1}" + (f"%{throttle}" if throttle else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--course", required=True, type=Path, help="the course folder, on the shared filesystem")
    parser.add_argument("--shards", required=True, type=int, help="array tasks, one shard of the class each")
    parser.add_argument("--throttle", type=int, default=None, metavar="K", help="at most K tasks at once (%%K)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once per task = its CPUs")
    parser.add_argument("--python", default=sys.executable, help="python with the autograder installed "
                                                                 "(default: this one)")
    parser.add_argument("--grade-args", default="", help="more options for `python -m autograder grade`")
    parser.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                        help="passed to both sbatch calls (repeatable): --partition=..., --account=..., --time=...")
    parser.add_argument("--finish-after", metavar="ARRAY", help="submit only a finishing job, after this array")
    args = parser.parse_args(argv)
    if args.shards < 1 or args.jobs < 1 or (args.throttle is not None and args.throttle < 1):
        parser.error("--shards, --jobs and --throttle must be >= 1")
    course = args.course.resolve()
    if not (course / "nbgrader_config.py").is_file():
        parser.error(f"{course} has no nbgrader_config.py")
    logs = course / ".grading" / "slurm"
    logs.mkdir(parents=True, exist_ok=True)
    common = [f"--chdir={course}", *args.sbatch_arg]
    array, aside = args.finish_after, None
    if array is None:
        aside = set_aside(course)
        array = sbatch([*common, f"--array={array_spec(args.shards, args.throttle)}",
                        f"--cpus-per-task={args.jobs}", f"--output={logs}/grade-%A_%a.out",
                        environment(course, args.shards, args.python, args.grade_args),
                        str(HERE / "grade-array.sbatch")])
    finish = sbatch([*common, f"--dependency=afterany:{array}", f"--output={logs}/finish-%j.out",
                     environment(course, args.shards, args.python, "", array), str(HERE / "finish.sbatch")])
    print(json.dumps({"array": array, "finish": finish, "logs": str(logs),
                      "earlier_shard_files": str(aside) if aside else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
