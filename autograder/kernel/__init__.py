"""The kernel side: everything a student's notebook imports, and nothing else.

Visible check helpers (``checks``), the hidden checks' observations (``hidden``,
``observations``), lesson figures, widgets and data access live here. The grading
sandbox mounts this folder alone; the instructor's tools (release, grading, judging)
live beside it in ``autograder`` and are never importable inside a student's kernel.
"""
