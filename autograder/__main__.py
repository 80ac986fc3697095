"""Command line: ``python -m autograder release|lessons|grade|finish|report ...`` (see ``--help``)."""
from __future__ import annotations

import argparse
import sys

from autograder import classreport
from autograder.grading import cli as grading_cli
from autograder.grading.report import finish as grading_finish

from . import course


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    rel = commands.add_parser("release", help="re-execute solutions/ and regenerate notebooks/")
    rel.add_argument("lessons", nargs="*", help="lesson ids (default: all)")
    rel.add_argument("--no-execute", action="store_true", help="only regenerate the student release")

    commands.add_parser("lessons", help="list the lesson ids")
    grading_cli.add_parser(commands)
    grading_finish.add_parser(commands)
    classreport.add_parser(commands)

    args = parser.parse_args(argv)
    if args.command == "grade":
        return grading_cli.run(args, commands.choices["grade"])
    if args.command == "finish":
        return grading_finish.run(args, commands.choices["finish"])
    if args.command == "report":
        return classreport.run(args, commands.choices["report"])
    if args.command == "lessons":
        print("\n".join(course.lessons()))
        return 0
    known = course.lessons()
    unknown = [lesson for lesson in args.lessons if lesson not in known]
    if unknown:
        parser.error(f"unknown lesson(s): {', '.join(unknown)}; known: {', '.join(known)}")
    course.release(lesson_ids=args.lessons or None, execute=not args.no_execute)
    return 0


if __name__ == "__main__":
    sys.exit(main())
