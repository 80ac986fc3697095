"""The feedback service's settings: ``c.PTEFeedback.<name>`` in the course's ``nbgrader_config.py``."""
from __future__ import annotations

from traitlets import Bool, Float, Integer, List, Unicode
from traitlets.config import Configurable


class PTEFeedback(Configurable):
    """Feedback on submit, set in the course's ``nbgrader_config.py`` (``c.PTEFeedback.<name>``)."""

    assignments = List(Unicode(), default_value=[],
                       help="assignments graded on submit (none: the service grades nothing)").tag(config=True)
    cooldown_s = Float(600.0, help="seconds between the starts of two gradings of one student's assignment"
                       ).tag(config=True)
    max_per_assignment = Integer(10, help="gradings per student and assignment").tag(config=True)
    max_per_day = Integer(20, help="gradings per student and day (UTC), all assignments").tag(config=True)
    poll_s = Float(1.0, help="seconds between two looks at the exchange's inbound folder").tag(config=True)
    batch = Integer(30, help="submissions of one assignment graded in one run of the grading command, at most"
                    ).tag(config=True)
    settle_s = Float(1.0, help="while submissions keep arriving, wait until this many seconds pass without a new "
                     "one before a run of the grading command takes them together").tag(config=True)
    settle_max_s = Float(20.0, help="... but start grading at most this many seconds after the first of them was "
                         "noticed").tag(config=True)
    hide_score = List(Unicode(), default_value=[],
                      help="assignments whose feedback on submit shows no points: the checks' messages and hints, "
                           "but neither the total nor any cell's score (default: every page shows them)"
                      ).tag(config=True)
    latest_grade_counts = Bool(False, help="the service's grade of each student's latest graded submission is the "
                               "official grade: written into the course's gradebook and grades.csv (off: the "
                               "official grades are the instructor's, the grading command after the deadline, "
                               "and the service never writes the course's gradebook)").tag(config=True)
    grade_args = List(Unicode(), default_value=[],
                      help="extra options of the grading command (e.g. ['--jobs', '1'])").tag(config=True)
    check_owner = Bool(False, help="each student is a Unix user of that name (a hub with local users): a "
                       "submission folder another user made in the student's name is ignored").tag(config=True)
