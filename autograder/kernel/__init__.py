"""The kernel side: everything a student's notebook imports, and nothing else.

The checking machinery lives here (the visible check helpers ``checks``, the hidden checks' client ``hidden``,
the self-check, the output cap, the predictions), each lesson's instruments (figures, widgets, data access,
its visible checks) in ``lessons``, and the vocabulary the kernel and the judge share in ``vocabulary`` (the
observation format, the messages, the notebook protocol and the reference file), which the grader imports
too. The grading
sandbox mounts this folder alone; the instructor's tools (release, grading, judging) live beside it in
``autograder`` and are never importable inside a student's kernel.
"""
