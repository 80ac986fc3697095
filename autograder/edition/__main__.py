"""``python -m autograder.edition DEST [--lesson ID ...] [--git]``: see the package docstring."""
import sys

from .build import main

sys.exit(main())
