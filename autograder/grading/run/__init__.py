"""Executing: the pool of grading workers, one submission per worker, its kernel and its channel."""
