"""The student edition: a folder to hand out as its own repository, with nothing students must not see.

    python -m autograder.edition DEST [--lesson ID ...] [--git]

DEST receives the release (``notebooks/``), the kernel-side package the notebooks import
(``autograder/__init__.py`` and the modules of ``autograder/kernel/`` that the shipped lessons
and ``make check`` import, directly or not), the shipped data (``data/``,
without the scripts that rebuild it), pinned ``requirements.txt`` and ``environment.yml``
(the students' subset of the course's pins), a ``pyproject.toml`` that packages only the
kernel side, a Makefile (``make lab``, ``make check``), a student README and the course's two
licences, ``LICENSE`` (MIT, the code) and ``LICENSE-CONTENT`` (CC BY-SA 4.0, the prose and
figures). The templates live in ``edition/`` of the course.

Left out: ``solutions/`` (answers, hidden tests, reference observations), the instructor's
tools (``autograder/grading``, ``course.py``, ``__main__.py``, this package), ``tests/``,
gradebooks, submissions, feedback, virtual environments and caches. Before writing, the
release is checked for solution or hidden-test markers, outputs and imports of modules
the edition does not ship; any of them stops the build.

DEST must be a new or empty folder, or an earlier edition (it holds ``.student-edition``):
then everything in it except ``.git/`` is replaced. ``--git`` commits the result (creating
the repository if needed), ready to push.

The package, a module per thing it holds:

- ``contents``: which files of the course ship (the release, checked for leaks; the kernel package; the
  data; the licences);
- ``imports``: the import graph: the kernel modules the notebooks and ``make check`` need, and every module
  that code imports;
- ``pins``: the course's pins, id and version, and the students' pinned packages;
- ``render``: the generated files (README with its lessons table, ``pyproject.toml``, requirements,
  ``environment.yml``, the data README);
- ``build``: the build itself, the destination folder, the git commit and the command line.
"""
