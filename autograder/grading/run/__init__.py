"""Executing: the pool of grading workers, one submission (or one assignment's reference, the solution run like a
student) per worker, its kernel and its channel."""
