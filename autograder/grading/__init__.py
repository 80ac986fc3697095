"""The instructor's grading command (``python -m autograder grade``), built on nbgrader."""
