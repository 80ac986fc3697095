"""The feedback service's settings: ``c.PTEFeedback.<name>`` in the course's ``nbgrader_config.py``."""
from __future__ import annotations

from traitlets import Bool, Enum, Float, Integer, List, Unicode
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
    identity = Enum(["folder-name", "owner", "hub"], default_value="folder-name",
                    help="who a submission counts for: 'hub', the hub-authenticated exchange wrote the inbound entry "
                         "(owned by the service's user); 'owner', each student is a Unix user and owns the entry "
                         "nbgrader's submit made (as check_owner); 'folder-name', the name the student chose "
                         "(latest_grade_counts refuses to start with it)").tag(config=True)
    inbound = Unicode("", help="the folder of inbound submissions the service reads (default: the exchange's "
                      "<root>/<course_id>/inbound); each entry <student>+<assignment>+<timestamp>[+<random>]"
                      ).tag(config=True)
    keep_backups = Integer(5, help="gradebook backups the service's grading runs leave in its folder, newest "
                           "kept").tag(config=True)
    max_failures = Integer(3, help="tries of a submission that fails for a reason of its own (its secret not "
                           "written yet, an error) before the student is told it will not be graded"
                           ).tag(config=True)
    retry_s = Float(5.0, help="seconds before such a submission is tried again").tag(config=True)

    def trusted_identity(self) -> str:
        """'hub', 'owner' or 'folder-name': the identity in force (check_owner counts as 'owner')."""
        return "owner" if self.check_owner and self.identity == "folder-name" else self.identity
