"""Importing autograder.course puts the venv's scripts (nbgrader calls `alembic`) on PATH."""
import autograder.course  # noqa: F401
