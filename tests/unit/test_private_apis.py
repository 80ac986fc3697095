"""Every private name of another library the course uses resolves, with the parameters it is declared with
(autograder/kernel/private_apis.py, autograder/grading/private_apis.py); a changed one fails loudly, naming the
library and its version."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from autograder import course
from autograder.grading import private_apis as grader_side
from autograder.kernel import private_apis as kernel_side

ENTRIES = grader_side.REGISTRY + kernel_side.REGISTRY


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.where)
def test_each_private_name_is_there_as_declared(entry):
    kernel_side.get(entry)


def test_a_gone_or_changed_name_names_the_library_and_its_version():
    gone = dataclasses.replace(grader_side.HANDLE_TIMEOUT, name="_async_handle_timeout_renamed")
    with pytest.raises(kernel_side.PrivateAPIChanged, match=r"^nbclient \d+\.\d+\.\d+\S*: nbclient\.client\."
                                                            r"NotebookClient\._async_handle_timeout_renamed is gone"):
        kernel_side.get(gone)
    reshaped = dataclasses.replace(kernel_side.GENERATE_STATE, parameters=("seed",))
    with pytest.raises(kernel_side.PrivateAPIChanged, match=r"^torch \S+: .*_generate_state takes \('base_seed', "
                                                            r"'worker_id'\), the course expects \('seed',\)"):
        kernel_side.get(reshaped)


def test_no_private_name_of_those_libraries_is_used_outside_the_registries():
    """The names the registries declare appear, as attributes, nowhere else in the package and the tests."""
    names = {entry.name for entry in ENTRIES}
    allowed = {Path("autograder/grading/private_apis.py"), Path("autograder/kernel/private_apis.py"),
               Path("tests/unit/test_private_apis.py")}
    found = []
    for folder in ("autograder", "tests", "bench"):
        for path in sorted((course.REPO_ROOT / folder).rglob("*.py")):
            relative = path.relative_to(course.REPO_ROOT)
            if relative in allowed:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                found += [f"{relative}:{number}: {name}" for name in names if re.search(rf"\.{name}\b", line)]
    assert not found, "private names used outside the registries (look them up with private_apis.get):\n" + "\n".join(
        found)
