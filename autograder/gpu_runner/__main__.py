"""``python -m autograder.gpu_runner``: see the package docstring."""
import sys

from autograder.gpu_runner.cli import main

sys.exit(main())
