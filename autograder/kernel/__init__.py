"""The kernel side: everything a student's notebook imports, and nothing else.

Visible check helpers (``checks``), the hidden checks' client (``hidden``), lesson figures, widgets and data
access live here, and so does the vocabulary the kernel and the judge share (``vocabulary``: the observation
format, the messages, the notebook protocol and the reference file), which the grader imports too. The grading
sandbox mounts this folder alone; the instructor's tools (release, grading, judging) live beside it in
``autograder`` and are never importable inside a student's kernel.
"""
