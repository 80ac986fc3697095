"""The lesson instruments: what each lesson's notebook imports besides the checking machinery of
``autograder.kernel`` (figures, widgets, data helpers, DataLoader worker code, and each lesson's visible checks).

One module does one thing; a lesson may have several (lesson 03: ``digits``, ``workers``,
``data_loading_checks``). Anything a DataLoader worker runs lives here, importable from the package, so that
workers started with ``spawn`` (macOS, Windows) find it. ``tests/unit/test_layout.py`` keeps every module that is
not machinery out of ``autograder/kernel/`` itself.
"""
