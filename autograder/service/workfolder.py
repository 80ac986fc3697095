"""The service's own course folder: its ``nbgrader_config.py`` (the course's, then the service's settings:
its gradebook, the feedback page without points), and the official grade it hands to the course's folder when
the latest feedback grade counts (the student's row of ``grades.csv``)."""
from __future__ import annotations

import csv
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"
CONFIG_HEADER = ("# Written by the feedback service (autograder/service/service.py) before each grading run, and\n"
                 "# written again at the next: the course's own settings, then the service's.\n")


def template_dirs() -> list[str]:
    """nbconvert's template folders for the feedback page: nbgrader's (its ``feedback`` template) and the
    service's (``pte_feedback``, which extends it)."""
    import nbgrader

    return [str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"), str(TEMPLATES)]


def service_config(course_config: Path, work: Path, db_url: str, hide_score: bool) -> str:
    """The text of the service's own ``nbgrader_config.py``: the course's, then its folder, its gradebook and,
    when the score is hidden, nbgrader's feedback page without points (``templates/pte_feedback``)."""
    lines = [CONFIG_HEADER + "c = get_config()  # noqa: F821",
             f"load_subconfig({str(course_config)!r})  # noqa: F821",
             f"c.CourseDirectory.root = {str(work)!r}",
             f"c.CourseDirectory.db_url = {db_url!r}"]
    if hide_score:
        lines += ["c.HTMLExporter.template_name = 'pte_feedback'",
                  "c.HTMLExporter.template_file = 'no_score.html.j2'",
                  f"c.HTMLExporter.extra_template_basedirs = {template_dirs()!r}"]
    return "\n".join(lines) + "\n"


def merge_csv_row(source: Path, target: Path, student: str, assignment: str) -> bool:
    """Put ``student``'s row for ``assignment`` from the grading command's ``grades.csv`` at ``source`` into the
    one at ``target`` (replacing theirs, keeping every other row; written whole, then renamed into place);
    whether there was such a row."""
    with open(source, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        row = next((r for r in reader if (r["student_id"], r["assignment"]) == (student, assignment)), None)
    if row is None:
        return False
    rows = {}
    if target.is_file():
        with open(target, newline="") as handle:
            rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
    rows[(student, assignment)] = row
    partial = target.with_name(target.name + ".partial")
    with open(partial, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for key in sorted(rows):
            writer.writerow(rows[key])
    partial.replace(target)
    return True
