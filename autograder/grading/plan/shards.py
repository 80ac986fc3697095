"""Which shard of a class one grading run takes, and the files that shard alone writes.

A student belongs to shard ``sha256(id) mod N``: the split depends on the student's id and ``N`` only, never
on the order the submissions are listed in, so a retried shard grades the same students again.

``--shard I/N`` names the shard; ``--shard auto`` reads it from the scheduler that started the run:

- Slurm job array: ``SLURM_ARRAY_TASK_ID``, with the array's size from ``SLURM_ARRAY_TASK_MIN``/``MAX``
  (and ``STEP``), else ``SLURM_ARRAY_TASK_COUNT``. ``--array=0-7`` and ``--array=1-8`` both give 8 shards.
- Kubernetes Indexed Job: ``JOB_COMPLETION_INDEX``; Kubernetes does not tell the pod how many completions
  there are, so the count comes from ``--shard-count`` or ``c.PTEGrading.shard_count``.

Every shard writes its own ``grades.shard-I-of-N.csv``, ``grading-report.shard-I-of-N.json`` and working
folder ``.grading/shard-I-of-N/``, so shards that share the course folder never write the same file;
``python -m autograder finish`` (:mod:`autograder.grading.report.finish`) joins them.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

Shard = tuple[int, int]   # (index, count), 0 <= index < count

AUTO = "auto"
SLURM_ID = "SLURM_ARRAY_TASK_ID"
KUBERNETES_INDEX = "JOB_COMPLETION_INDEX"
REPORT_PATTERN = re.compile(r"^grading-report\.shard-(\d+)-of-(\d+)\.json$")


def shard_of(student: str, count: int) -> int:
    """The shard (0 .. count-1) a student id belongs to."""
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % count


def in_shard(student: str, shard: Shard | None) -> bool:
    """Does ``student`` belong to ``shard`` (None: the whole class)?"""
    return shard is None or shard_of(student, shard[1]) == shard[0]


def parse(spec: str) -> Shard | str:
    """``"I/N"`` -> (I, N); ``"auto"`` stays ``"auto"`` (resolved with :func:`from_environment`)."""
    if spec.strip().lower() == AUTO:
        return AUTO
    try:
        index, count = (int(part) for part in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard wants I/N with 0 <= I < N, or auto, got {spec!r}") from None
    if not 0 <= index < count:
        raise ValueError(f"--shard wants I/N with 0 <= I < N, or auto, got {spec!r}")
    return index, count


def _integer(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"--shard auto: {name}={value!r} is not a whole number") from None


def from_environment(env: Mapping[str, str], count: int | None = None) -> Shard:
    """The shard of ``--shard auto`` from a scheduler's environment. ``count`` is the shard count given on
    the command line or in the course config: required for Kubernetes, checked against Slurm's array."""
    if count is not None and count < 1:
        raise ValueError(f"the shard count must be >= 1, got {count}")
    if env.get(SLURM_ID, "").strip():
        return _slurm(env, count)
    if env.get(KUBERNETES_INDEX, "").strip():
        index = _integer(env, KUBERNETES_INDEX)
        if count is None:
            raise ValueError(f"--shard auto: {KUBERNETES_INDEX}={index} is set, but not how many shards there "
                             "are: give --shard-count N (the Job's completions) or c.PTEGrading.shard_count")
        if not 0 <= index < count:
            raise ValueError(f"--shard auto: {KUBERNETES_INDEX}={index} is outside 0..{count - 1} "
                             f"(the shard count is {count})")
        return index, count
    raise ValueError(f"--shard auto reads the shard from a scheduler, and none is set: neither {SLURM_ID} "
                     f"(a Slurm job array) nor {KUBERNETES_INDEX} (a Kubernetes Indexed Job). Outside a "
                     "scheduler give the shard yourself, --shard I/N, or grade the whole class without --shard.")


def _slurm(env: Mapping[str, str], count: int | None) -> Shard:
    task = _integer(env, SLURM_ID)
    low, high = _integer(env, "SLURM_ARRAY_TASK_MIN"), _integer(env, "SLURM_ARRAY_TASK_MAX")
    step = _integer(env, "SLURM_ARRAY_TASK_STEP") or 1
    tasks = _integer(env, "SLURM_ARRAY_TASK_COUNT")
    if low is not None and high is not None:
        if (task - low) % step or not low <= task <= high:
            raise ValueError(f"--shard auto: task {task} is not one of the array {low}-{high}:{step}")
        index, size = (task - low) // step, (high - low) // step + 1
        if tasks is not None and tasks != size:
            raise ValueError(f"--shard auto: the array {low}-{high}:{step} has {size} indices but "
                             f"SLURM_ARRAY_TASK_COUNT={tasks}: shards need an array that is one range "
                             "(--array=0-N or 0-N%K), not a list")
    elif tasks is not None:
        index, size = task, tasks
    else:
        raise ValueError(f"--shard auto: {SLURM_ID} is set but neither SLURM_ARRAY_TASK_MIN/MAX nor "
                         "SLURM_ARRAY_TASK_COUNT: cannot tell the size of the array")
    if not 0 <= index < size:
        raise ValueError(f"--shard auto: array task {task} is outside the {size} tasks of its array")
    if count is not None and count != size:
        raise ValueError(f"--shard auto: the Slurm array has {size} tasks but the shard count is {count} "
                         "(--shard-count or c.PTEGrading.shard_count); submit --array with as many tasks "
                         "as shards")
    return index, size


def resolve(shard: Shard | str | None, count: int | None, env: Mapping[str, str]) -> Shard | None:
    """The settings' shard once the course config is read: ``auto`` from ``env``; an explicit I/N must
    agree with a shard count, when one is given."""
    if shard == AUTO:
        return from_environment(env, count)
    if shard is not None and count is not None and shard[1] != count:
        raise ValueError(f"--shard {shard[0]}/{shard[1]} and a shard count of {count} disagree")
    return tuple(shard) if shard is not None else None


def tag(shard: Shard) -> str:
    """``shard-I-of-N``: the part of a file name that says which shard wrote it."""
    return f"shard-{shard[0]}-of-{shard[1]}"


def output_names(shard: Shard | None) -> tuple[str, str]:
    """(grades CSV, report JSON) that a run writes in the course folder."""
    if shard is None:
        return "grades.csv", "grading-report.json"
    return f"grades.{tag(shard)}.csv", f"grading-report.{tag(shard)}.json"


def work_name(shard: Shard | None) -> str:
    """The run's own folder under ``.grading/`` (staged notebooks, the recording log)."""
    return "." if shard is None else tag(shard)


def report_shard(name: str) -> Shard | None:
    """(I, N) of a shard report's file name, None for any other name."""
    match = REPORT_PATTERN.match(name)
    if not match:
        return None
    index, count = int(match.group(1)), int(match.group(2))
    return (index, count) if 0 <= index < count else None
