"""``python -m autograder finish``: the whole class's ``grades.csv`` and ``grading-report.json`` once every
shard has run (exit codes: 0 all graded, 3 some notebook needs attention, 4 some student no shard graded,
2 bad arguments).

Each shard (``grade --shard I/N`` or ``--shard auto``) wrote ``grading-report.shard-I-of-N.json`` in the
course folder and its scores into the shared gradebook. This step reads the reports of one shard count,
takes each notebook's status from them and its score from the gradebook, and writes the class's files the
way a one-machine run writes them (:func:`reporting.write_outputs`). A notebook that two reports hold (a
shard graded again) counts once: the newer report's. Every submission in ``submitted/`` that no report
holds (a shard that died or never started, a student added after the shards ran) is named on stderr and in
the report's ``not_graded``, and the exit code is 4, so a scheduler's finishing job shows that the class is
not complete; grading that shard again and finishing again completes it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from autograder.grading.messages import GradingReport, MessageError, NotebookResult
from autograder.grading.plan import shards
from autograder.grading.plan.planning import UsageError, course_layout, discover, load_coursedir
from autograder.grading.report.reporting import check_verdicts, read_scores, write_outputs
from autograder.grading.status import Status

EXIT_NOT_GRADED = 4


def add_parser(commands) -> None:
    finish = commands.add_parser(
        "finish", help="after every shard: the class's grades.csv and grading-report.json, and who was not graded",
        description="Join the shards' grading-report.shard-I-of-N.json files and the shared gradebook into "
                    "DIR/grades.csv and DIR/grading-report.json. Names every submission no shard graded and "
                    "exits 4 then; 3 when a notebook needs attention; 0 when all are graded.")
    finish.add_argument("--course", required=True, type=Path, help="the nbgrader course folder")
    finish.add_argument("--shard-count", type=int, default=None, metavar="N",
                        help="the shards' count (default: c.PTEGrading.shard_count, else the one count the "
                             "reports in DIR have)")
    finish.add_argument("--assignment", action="append", dest="assignments", metavar="ID",
                        help="only this assignment (repeatable; default: what the shards graded)")


def run(args, parser) -> int:
    try:
        return finish(args.course, args.shard_count, args.assignments)
    except UsageError as exc:
        parser.error(str(exc))


def read_report(path: Path) -> GradingReport:
    """A shard's report, or UsageError saying which file is not one this version reads."""
    try:
        return GradingReport.read(path)
    except (OSError, MessageError) as exc:
        raise UsageError(f"{path.name} is not a grading report this version reads ({exc}); grade that shard "
                         "again") from None


def shard_reports(course: Path) -> dict[shards.Shard, Path]:
    """(index, count) -> the report that shard wrote in ``course``."""
    found = {}
    for path in sorted(course.glob("grading-report.shard-*-of-*.json")):
        shard = shards.report_shard(path.name)
        if shard is not None:
            found[shard] = path
    return found


def choose_count(found: dict[shards.Shard, Path], count: int | None) -> int:
    """The shard count whose reports make up the class: the one given, else the only one present."""
    if count is not None:
        if count < 1:
            raise UsageError(f"--shard-count must be >= 1, got {count}")
        return count
    counts = sorted({n for _, n in found})
    if len(counts) == 1:
        return counts[0]
    if not counts:
        raise UsageError("no shard reports (grading-report.shard-I-of-N.json) in the course folder, and "
                                  "no --shard-count: did any shard run here?")
    raise UsageError(f"the course folder holds reports of {', '.join(map(str, counts))} shards: say "
                              "which run to finish with --shard-count N (or remove the old reports)")


def merge(reports: list[tuple[Path, GradingReport]]) -> tuple[list[NotebookResult], list[str]]:
    """Every notebook result of ``reports`` (oldest first) once, the newest report's; and the notebooks that
    were graded more than once, as ``student/assignment/notebook``."""
    latest: dict[tuple[str, str, str], NotebookResult] = {}
    twice = set()
    for _, report in reports:
        for result in report.submissions:
            key = (result.student, result.assignment, result.notebook)
            if key in latest:
                twice.add("/".join(key))
            latest[key] = result
    return [latest[key] for key in sorted(latest)], sorted(twice)


def not_graded(expected: list[tuple[str, str]], results: list[NotebookResult], count: int,
               found: dict[shards.Shard, Path]) -> list[dict]:
    """The submissions no report holds, each with its shard and why it is missing."""
    graded = {(r.student, r.assignment) for r in results}
    missing = []
    for student, assignment in sorted(expected):
        if (student, assignment) in graded:
            continue
        index = shards.shard_of(student, count)
        report = found.get((index, count))
        why = (f"{report.name} does not hold it (submitted after that shard ran, or that shard graded only "
               "part of the class)" if report else
               f"shard {index} of {count} wrote no report (it failed, was cancelled or has not run)")
        missing.append({"student": student, "assignment": assignment, "shard": index, "why": why})
    return missing


def finish(course: Path, count: int | None = None, assignments: list[str] | None = None,
           stream=sys.stderr) -> int:
    """Write the class's grades.csv and grading-report.json from the shards' reports; return the exit code."""
    course = Path(course).resolve()
    if not course.is_dir():
        raise UsageError(f"course folder {course} does not exist")
    coursedir = load_coursedir(course)
    configured = (coursedir.config.get("PTEGrading", {}) or {}).get("shard_count")
    found = shard_reports(course)
    count = choose_count(found, count if count is not None else configured)
    ours = {shard: path for shard, path in found.items() if shard[1] == count}
    reports = sorted(((path, read_report(path)) for path in ours.values()), key=lambda item: item[0].stat().st_mtime)
    layout = course_layout(coursedir)
    if assignments is None:   # what the shards were asked to grade: all of them unless every shard narrowed it
        chosen = [(r.settings or {}).get("assignments") for _, r in reports]
        assignments = sorted({a for c in chosen for a in c}) if chosen and all(chosen) else None
    selection = SimpleNamespace(assignments=assignments, students=None, shard=None)
    expected = discover(coursedir, selection, layout)
    results, twice = merge(reports)
    results = [r for r in results if assignments is None or r.assignment in assignments]
    strays = set()   # a student in a report of a shard that is not theirs: the hash or the report is not this run's
    for path, report in reports:
        index = shards.report_shard(path.name)[0]
        strays |= {f"{item.student} ({path.name})" for item in report.submissions
                   if shards.shard_of(item.student, count) != index}
    scores, autos = read_scores(coursedir, [(r.student, r.assignment, r.notebook) for r in results])
    for r in results:
        r.score = float(scores.get((r.student, r.assignment, r.notebook)) or 0.0)
    check_verdicts(results, autos, lambda text: stream.write(text + "\n"))
    missing = not_graded(expected, results, count, ours)
    meta = {"course": str(course), "finished_from": [path.name for path, _ in reports], "shard_count": count,
            "shards": {shards.tag(shards.report_shard(path.name)): {
                key: getattr(report, key) for key in ("seconds", "jobs", "sandbox", "cgroups", "references")}
                for path, report in reports},
            "not_graded": missing, "graded_more_than_once": twice,
            "partial": assignments is not None}
    write_outputs(course, results, meta)
    for name in twice:
        stream.write(f"graded more than once, counted once (the newest report): {name}\n")
    for stray in sorted(strays):
        stream.write(f"warning: {stray}: not that shard's student with {count} shards (an old report?)\n")
    for item in missing:
        stream.write(f"not graded: {item['student']}/{item['assignment']} (shard {item['shard']} of {count}): "
                     f"{item['why']}\n")
    bad = [r for r in results if r.status != Status.GRADED]
    stream.write(f"{len(results) - len(bad)} of {len(results)} notebooks graded, from {len(reports)} of {count} "
                 f"shard reports" + (f"; {len(bad)} need attention (see grading-report.json)" if bad else "")
                 + (f"; {len(missing)} submission(s) not graded by any shard" if missing else "") + "\n")
    stream.flush()
    if missing:
        return EXIT_NOT_GRADED
    return 3 if bad else 0
