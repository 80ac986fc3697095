"""The instructor's grading command (``python -m autograder grade``), built on nbgrader.

Its stages import downward only (``tests/unit/test_stage_imports.py`` says why each sits where it does): the
command (``cli``, ``pipeline``) > ``run`` > ``report`` > ``record`` > ``judging`` > ``intake`` > ``plan`` >
``isolate`` > the shared vocabulary (``messages``, ``status``, ``private_apis``).
"""
