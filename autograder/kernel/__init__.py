"""The kernel side: everything a student's notebook imports, and nothing else.

Check helpers (``checks``), observation encoding (``observations``), lesson figures,
widgets and data access live here. The grading sandbox mounts this folder alone; the
instructor's tools (release, grading, judging) live beside it in ``autograder`` and
are never importable inside a student's kernel.
"""
