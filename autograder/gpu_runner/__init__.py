"""The GPU runner: every solution re-executed with CUDA available, then lesson 08's CUDA assertions.

Run it as ``make test-gpu`` or ``bash .ci/gpu-test.sh`` (the CI job on ``[self-hosted, gpu]``), which pick
the interpreter, or as ``python -m autograder.gpu_runner`` from the repository. It prints the Python, torch,
CUDA and GPU it runs with first and a summary table (lesson, cells run, skipped, passed, failed, status)
last. Exit status: 0 only when every notebook and every CUDA assertion passed, with CUDA available (or
without it on a dry run); 1 when anything failed, timed out or did not run, or when no notebook runner can
be had; 2 for a bad setting.

What the GPU machine needs. Nothing is installed from the network: a Python that imports torch (a CUDA
build, torch >= 2.4), numpy and matplotlib, and ipywidgets for the lessons with widgets. This package
imports nothing beyond the standard library at the top of its modules (and ``autograder.kernel.vocabulary.protocol``,
which is standard library only), so it starts there. Then the best notebook runner it finds:

- ``nbval``: pytest + nbval + ipykernel. As on CPU CI, stored outputs are compared (cells tagged
  ``nbval-ignore-output``, i.e. timings, devices and the CUDA-only cells, run but are not compared) and
  ``tests/conftest.py`` fails the run if a ``requires-cuda`` cell did not run (``PTE_EXPECT_CUDA=1``).
- ``nbclient``: nbclient + ipykernel. Every cell runs in a Jupyter kernel; it checks that none raises.

Wheels in ``.whl/`` (pytest, nbval, nbclient, ipykernel and their dependencies) are installed offline
into a temporary folder first, when one of those modules is missing: that is how a machine without
Jupyter and without network gets a runner. Where neither runner can be had, the run stops with exit
status 1 and says which modules to install.

Settings (environment variables):

- ``PYTHON=...``: the interpreter ``.ci/gpu-test.sh`` uses (else the first of ``.venv/bin/python``,
  ``python3``, ``python`` that imports torch);
- ``GPU_TEST_RUNNER=nbval|nbclient``: force a runner (default ``auto``, the best available);
- ``GPU_TEST_LESSONS=01_x,08_y``: run a subset of the lessons;
- ``GPU_TEST_SOLUTIONS=dir``: the folder holding ``<id>/<id>.ipynb`` (default ``solutions``, relative
  to the repository);
- ``GPU_TEST_ALLOW_CPU=1``: a dry run without CUDA: CUDA-only cells are skipped and counted;
- ``GPU_TEST_BUDGET_S=570``: the wall-clock budget for everything (it fits the CI job's 15-minute timeout).

The package, a module per thing it holds: ``settings`` (the settings, the budget, a run's context),
``machine`` (what the machine has: versions, modules, the offline wheels, the environment of the run),
``runners`` (the notebook runners, their choice and the CUDA assertions), ``report`` (judging what ran and
the summary table) and ``cli`` (the whole run and the command line).
"""
