"""nbgrader configuration: this repository is the nbgrader course.

solutions/<id>/<id>.ipynb is the source, notebooks/<id>/<id>.ipynb the student release.
"""
import os

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# The exchange and a server gradebook (PostgreSQL enforces the course foreign key) need an id.
c.CourseDirectory.course_id = "pytorch-essentials"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"

# One BLAS/OpenMP thread per kernel, for both graders: plain `nbgrader autograde` (whose kernels inherit
# this environment) and `python -m autograder grade` (which reads kernel_threads from here). Thread count
# changes how some reductions round, so the two must never disagree.
c.PTEGrading.kernel_threads = 1
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(c.PTEGrading.kernel_threads)

# A training loop may take a while on a slow laptop, but a hung cell must not stall grading.
# (The grading command reads this as its per-cell cap too.)
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# A student who deletes a graded cell gets it back (scored on the original tests).
c.OverwriteCells.add_missing_cells = True

# torch emits UserWarnings/FutureWarnings on stderr; keep them out of graded output.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(UserWarning|FutureWarning|DeprecationWarning)"

# An output flood should not bloat the autograded notebook or the feedback.
c.LimitOutput.max_lines = 300
c.LimitOutput.max_traceback = 60

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# The reference observations that hidden checks are judged against stay with the
# instructor's source: generate_assignment must never copy them into notebooks/.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "reference_observations.json"]

# Feedback on submit (python -m autograder.service; deploy/jupyterhub runs it as a hub service): the assignments
# graded as soon as a student submits, and the limits against probing the hidden checks by trial and error.
# Feedback shows the visible checks' messages and each failed hidden check's hint, never its inputs or values.
c.PTEFeedback.assignments = []          # e.g. ["01_tensors_and_views"]
c.PTEFeedback.cooldown_s = 600.0        # between two gradings of one student's assignment
c.PTEFeedback.max_per_assignment = 10   # gradings per student and assignment
c.PTEFeedback.max_per_day = 20          # gradings per student and day (UTC)
# The page shows the points (nbgrader's feedback page) except for the assignments listed here: then the checks'
# messages and hints, but neither the total nor any cell's score.
c.PTEFeedback.hide_score = []
# Official grades stay the instructor's (the grading command after the deadline): the service grades in a course
# folder of its own. True: the service's grade of each student's latest graded submission is the official grade,
# written into this course's gradebook and grades.csv (with the submission in submitted/ and autograded/).
c.PTEFeedback.latest_grade_counts = False
