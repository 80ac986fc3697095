"""The class report as a static HTML page (counts only, every text escaped, pictures inlined) and as CSV
rows: per exercise and per check (beside the grades and the LMS exports), per student (the instructor's)."""
from __future__ import annotations

import html
import json
import statistics

from . import figures
from .tally import CheckTally, ExerciseTally, LessonTally, PredictionTally, Tally

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .5em;
vertical-align:top;font-size:.9em}th{background:#f3f3f3;text-align:left}td.n{text-align:right}
.note{color:#555;font-size:.9em}img{max-width:100%}h2{border-bottom:2px solid #ddd;margin-top:2em}"""


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(header: list[str], rows: list[list[object]], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="n">{e(v)}</td>' if i in numeric else f"<td>{e(v)}</td>"
                                    for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(uri: str | None, alt: str) -> str:
    return f'<p><img alt="{e(alt)}" src="{uri}"></p>' if uri else ""


def passed_after(tally: ExerciseTally) -> tuple[int, int, str]:
    """(passed at the first attempt, never passed, median attempts of those who passed)."""
    passed = [n for n, count in tally.to_pass.items() if n for _ in range(count)]
    return tally.to_pass.get(1, 0), tally.to_pass.get(0, 0), f"{statistics.median(passed):g}" if passed else ""


def kinds_text(check: CheckTally) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in sorted(check.kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def spread_text(p: PredictionTally, min_group: int) -> str:
    """Each answer at least ``min_group`` students gave (the right one always), the rest as one count."""
    right = [shown for shown in p.spread if _is_right(p, shown)]
    parts, other = [], 0
    for shown, count in sorted(p.spread.items(), key=lambda kv: (-kv[1], kv[0])):
        if shown in right or count >= min_group:
            parts.append(f"{shown}{' (right)' if shown in right else ''}: {count}")
        else:
            other += count
    if other:
        parts.append(f"other answers: {other}")
    return "; ".join(parts)


def _is_right(p: PredictionTally, shown: str) -> bool:
    from autograder.kernel import predictions

    return shown == predictions.shown(p.answer)


def exercise_rows(lesson: LessonTally) -> list[list[object]]:
    rows = []
    for t in lesson.exercises.values():
        first, never, median = passed_after(t)
        rows.append([t.exercise, f"{t.max_points:g}", t.students, t.full, t.partial, t.none, f"{t.mean:.2f}",
                     t.with_attempts, first if t.with_attempts else "", median, never if t.with_attempts else ""])
    return rows


EXERCISE_HEADER = ["exercise", "points", "students", "full points", "partial", "no points", "mean points",
                   "students with feedback attempts", "passed at the first attempt", "median attempts to pass",
                   "never passed"]
CHECK_HEADER = ["check", "hint (the course's words)", "students", "failed", "failed (%)", "how it failed",
                "not reached", "failed on the first attempt", "failed on the last attempt"]


def check_rows(lesson: LessonTally) -> list[list[object]]:
    ordered = sorted(lesson.checks.values(), key=lambda c: (-c.share, c.key))
    return [[c.name, c.label, c.seen, c.failed, f"{100 * c.share:.0f}", kinds_text(c), c.not_run,
             c.first_failed, c.last_failed] for c in ordered]


def lesson_section(lesson: LessonTally, min_group: int) -> str:
    parts = [f'<h2 id="{e(lesson.id)}">{e(lesson.id)}</h2>']
    statuses = ", ".join(f"{s} {n}" for s, n in sorted(lesson.statuses.items()))
    parts.append(f"<p>{lesson.students} students graded ({e(statuses)} notebooks).</p>")
    if lesson.students < min_group:
        parts.append(f'<p class="note">Fewer than {min_group} students: this lesson\'s figures are in the '
                     "instructor's CSV files only.</p>")
        return "\n".join(parts)
    parts.append("<h3>Exercises</h3>" + _table(EXERCISE_HEADER, exercise_rows(lesson), set(range(1, 11))))
    parts.append("<h3>Checks</h3>")
    parts.append(_figure(figures.failing_checks(list(lesson.checks.values())),
                         f"share of students failing each check of {lesson.id}"))
    parts.append(_table(CHECK_HEADER, check_rows(lesson), {2, 3, 4, 6, 7, 8}))
    if lesson.predictions:
        rows = [[p.id, p.form, answer_text(p), p.answered, p.right, p.not_answered, p.unreadable,
                 spread_text(p, min_group)] for p in lesson.predictions.values()]
        parts.append("<h3>Predictions</h3>" + _table(
            ["prediction", "kind", "right answer", "answered", "right", "not answered", "unreadable",
             f"answers (each given by at least {min_group} students, and the right one)"], rows, {3, 4, 5, 6}))
    histogram = figures.attempts_histogram(list(lesson.exercises.values()))
    if histogram:
        parts.append("<h3>Attempts</h3>" + _figure(histogram, f"feedback attempts until each exercise of "
                                                               f"{lesson.id} passed"))
    return "\n".join(parts)


def answer_text(p: PredictionTally) -> str:
    from autograder.kernel import predictions

    return predictions.shown(p.answer) if p.answer is not None else "(none in the solution)"


def html_page(tally: Tally, title: str, sources: list[str], min_group: int) -> str:
    nav = " · ".join(f'<a href="#{e(i)}">{e(i)}</a>' for i in tally.lessons)
    body = "\n".join(lesson_section(lesson, min_group) for lesson in tally.lessons.values())
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n<h1>{e(title)}</h1>\n<p>{nav}</p>\n"
            f'<p class="note">Counts only. A check\'s hint is the course\'s own sentence for it; hidden inputs, '
            f"expected values and what a kernel printed are not here. Student answers given by fewer than "
            f"{min_group} students are counted, not shown. From: {e('; '.join(sources))}.</p>\n{body}\n"
            "</body></html>\n")


def exercise_csv_rows(tally: Tally) -> list[dict]:
    rows = []
    for lesson in tally.lessons.values():
        for t in lesson.exercises.values():
            first, never, median = passed_after(t)
            rows.append({"assignment": lesson.id, "exercise": t.exercise, "max_points": f"{t.max_points:g}",
                         "students": t.students, "full": t.full, "partial": t.partial, "none": t.none,
                         "mean_points": f"{t.mean:.4f}", "students_with_attempts": t.with_attempts,
                         "passed_first_attempt": first, "median_attempts_to_pass": median,
                         "never_passed": never})
    return rows


def check_csv_rows(tally: Tally) -> list[dict]:
    rows = []
    for lesson in tally.lessons.values():
        for c in sorted(lesson.checks.values(), key=lambda c: c.key):
            rows.append({"assignment": lesson.id, "grade_id": c.grade_id, "part": c.part, "index": c.index,
                         "of": c.of, "hint": c.label, "students": c.seen, "failed": c.failed,
                         "failed_share": f"{c.share:.4f}", "kinds": kinds_text(c), "not_run": c.not_run,
                         "failed_first_attempt": c.first_failed, "failed_last_attempt": c.last_failed,
                         "hints_named": json.dumps(dict(sorted(c.hints.items())))})
    return rows
