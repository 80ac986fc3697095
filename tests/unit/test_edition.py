"""The student edition's modules one at a time (``autograder/edition/``): the course's pins, id and version as
the course's own files state them, the import graph, the generated files and the destination folder. The
whole build, what ships and what never does, is tests/e2e/test_student_edition.py."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.edition import build, imports, pins, render
from autograder.edition.errors import EditionError

# ---------------------------------------------------------------- pins: the course's own files

def test_exact_pins_are_read_as_pip_reads_them(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "# the course's pins\n"
        "torch==2.13.0\n"
        "Jupyter_Server.Terminals == 0.5.3   # spaced, mixed case: still one exact pin\n"
        "\n"
        "nbformat==5.11.1\n")
    assert pins.course_pins(tmp_path) == {"torch": "2.13.0", "jupyter-server-terminals": "0.5.3",
                                          "nbformat": "5.11.1"}


@pytest.mark.parametrize("line", ["torch>=2.4", "torch==2.*", "torch", "torch[cuda]==2.13.0",
                                  "torch==2.13.0; sys_platform == 'linux'", "torch==2.13.0,<3", "not a pin!"])
def test_a_requirement_that_is_not_one_exact_pin_stops_the_build(tmp_path, line):
    (tmp_path / "requirements.txt").write_text(f"numpy==2.4.6\n{line}\n")
    with pytest.raises(EditionError, match="is not an exact pin"):
        pins.course_pins(tmp_path)


def test_course_id_is_what_nbgrader_reads(tmp_path, monkeypatch):
    """A commented-out line is not the id, the config runs as nbgrader runs it, and what it sets in the
    environment for nbgrader's kernels does not stay in this process."""
    monkeypatch.delenv("PTE_EDITION_TEST", raising=False)
    (tmp_path / "nbgrader_config.py").write_text(
        "import os\n"
        "c = get_config()  # noqa: F821\n"
        "# c.CourseDirectory.course_id = \"last-year\"\n"
        "NAME = 'pytorch-essentials'\n"
        "c.CourseDirectory.course_id = NAME\n"
        "os.environ['PTE_EDITION_TEST'] = '1'\n")
    assert pins.course_id(tmp_path) == "pytorch-essentials"
    assert "PTE_EDITION_TEST" not in os.environ


def test_a_config_without_a_course_id_or_that_does_not_load_stops_the_build(tmp_path):
    config = tmp_path / "nbgrader_config.py"
    config.write_text("c = get_config()  # noqa: F821\nc.Execute.timeout = 120\n")
    with pytest.raises(EditionError, match="sets no CourseDirectory.course_id"):
        pins.course_id(tmp_path)
    config.write_text("c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = undefined_name  # noqa: F821\n")
    with pytest.raises(EditionError, match="nbgrader_config.py does not load: NameError"):
        pins.course_id(tmp_path)


def test_course_version_is_the_projects(tmp_path):
    """``project.version``, not the first ``version =`` line of the file (a tool's table may come first)."""
    (tmp_path / "pyproject.toml").write_text('[tool.other]\nversion = "9.9"\n\n[project]\nname = "x"\n'
                                             'version = "1.2.3"\n')
    assert pins.course_version(tmp_path) == "1.2.3"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert pins.course_version(tmp_path) == pins.DEFAULT_VERSION


def test_student_pins_add_what_the_shipped_code_imports_and_refuse_the_unpinned(tmp_path):
    course = {name: "1.0" for name in pins.STUDENT_PACKAGES}
    course.update({"pyyaml": "6.0.4", "pytest": "9.2.0"})
    (tmp_path / "requirements.txt").write_text("".join(f"{n}=={v}\n" for n, v in course.items()))
    imported = {"torch": {"notebooks/01"}, "yaml": {"autograder/kernel/x.py"}, "json": {"notebooks/01"},
                "autograder.kernel": {"notebooks/01"}}
    student = pins.student_pins(imported, tmp_path)
    assert list(student) == sorted(student), "sorted by name"
    assert set(student) == {*pins.STUDENT_PACKAGES, "pyyaml"}, "pytest is the course's, not the students'"
    with pytest.raises(EditionError, match="imports 'no_such_module_anywhere' .*notebooks/02"):
        pins.student_pins({"no_such_module_anywhere.sub": {"notebooks/02"}}, tmp_path)
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    with pytest.raises(EditionError, match="pins no version of"):
        pins.student_pins({}, tmp_path)


# ---------------------------------------------------------------- imports: the graph of the shipped code

def test_imports_of_code_cells_with_magics():
    sources = {"notebooks/01": ["%matplotlib inline\nimport torch\nfrom autograder.kernel import checks as c",
                                "!ls\nimport numpy.linalg", "this is not python ("]}
    found = imports.imports_of(sources)
    assert set(found) == {"torch", "autograder.kernel", "autograder.kernel.checks", "numpy.linalg"}
    assert found["torch"] == {"notebooks/01"}


PACKAGE = {
    Path("autograder/__init__.py"): '"""init"""\n',
    Path("autograder/kernel/__init__.py"): "",
    Path("autograder/kernel/selfcheck.py"): "from . import protocol\n",
    Path("autograder/kernel/protocol.py"): "import json\nfrom .observations import FORMAT\n",
    Path("autograder/kernel/observations.py"): "FORMAT = 1\n",
    Path("autograder/kernel/checks.py"): "import torch\nclass CheckFailed(Exception): pass\n",
    Path("autograder/kernel/spirals.py"): "from autograder.kernel.checks import CheckFailed\nimport matplotlib\n",
    Path("autograder/kernel/repro.py"): "import yaml\n",
}


def test_shipped_package_keeps_what_the_notebooks_and_make_check_reach():
    notebooks = {"notebooks/04": ["from autograder.kernel import spirals"]}
    kept, imported = imports.shipped_package(dict(PACKAGE), notebooks)
    assert set(kept) == set(PACKAGE) - {Path("autograder/kernel/repro.py")}, "repro is a left-out lesson's"
    assert {"torch", "matplotlib", "json"} <= set(imported) and "yaml" not in imported
    assert imported["matplotlib"] == {"autograder/kernel/spirals.py"}


def test_an_import_of_a_module_that_would_not_ship_stops_the_build():
    notebooks = {"notebooks/03": ["from autograder.kernel.data import digits", "from autograder.kernel.checks "
                                  "import CheckFailed, close_enough"]}
    with pytest.raises(EditionError, match=r"autograder\.kernel\.data \(notebooks/03\)") as raised:
        imports.shipped_package(dict(PACKAGE), notebooks)
    assert "close_enough" not in str(raised.value), "a name of a shipped module is not a module to ship"


def test_needed_modules_resolve_relative_imports_and_parent_packages():
    needed = imports.needed_modules(PACKAGE, {"autograder.kernel.selfcheck"})
    assert needed == {Path("autograder/__init__.py"), Path("autograder/kernel/__init__.py"),
                      Path("autograder/kernel/selfcheck.py"), Path("autograder/kernel/protocol.py"),
                      Path("autograder/kernel/observations.py")}


# ---------------------------------------------------------------- render: the generated files

def test_fill_refuses_a_placeholder_left_unfilled():
    assert render.fill("v{{version}} of {{name}}", {"version": "1", "name": "x"}) == "v1 of x"
    with pytest.raises(EditionError, match=r"unfilled placeholders: \['\{\{name\}\}'\]"):
        render.fill("v{{version}} of {{name}}", {"version": "1"})


def test_requirements_and_environment_list_the_same_pins():
    student = {"matplotlib": "3.11.2", "pyyaml": "6.0.4", "torch": "2.13.0"}
    assert render.requirements_txt(student).splitlines()[2:] == ["matplotlib==3.11.2", "pyyaml==6.0.4",
                                                                  "torch==2.13.0"]
    env = render.environment_yml(student).splitlines()
    deps = [line.split("#")[0].strip() for line in env[env.index("dependencies:") + 1:]]
    assert deps == ["- python=3.11", "- matplotlib=3.11.2", "- pyyaml=6.0.4", "- pytorch=2.13.0"]
    assert "# imported by the lessons' package" in env[-2] and pins.STUDENT_PACKAGES["torch"] in env[-1]


def test_data_readme_loses_its_rebuilding_section_only():
    text = "# Data\n\nintro\n\n## Rebuilding\n\npython build_digits.py\n\n### details\n\nmore\n\n## Files\n\nlist\n"
    out = render.data_readme(text)
    assert "build_digits" not in out and "more" not in out
    assert out.startswith("# Data\n\nintro\n\n## Rebuilding\n\nThese files are built by the instructor's")
    assert out.endswith("## Files\n\nlist\n")


def test_lessons_table_counts_graded_cells_and_points():
    test_cell = nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": 3, "grade_id": "t1"}})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 01 · Tensors and views\n\nwords"),
                                         test_cell, nbformat.v4.new_code_cell("x = 1")])
    table = render.lessons_table({"01_tensors_and_views": nb}).splitlines()
    assert table[2] == ("| 01 · Tensors and views | `notebooks/01_tensors_and_views/01_tensors_and_views.ipynb` "
                        "| 1 (3 points) |")


# ---------------------------------------------------------------- build: the folder and its commit

def test_dest_is_new_empty_or_an_earlier_edition(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    with pytest.raises(EditionError, match="outside the course folder"):
        build.prepare_dest(course / "edition", course)
    other = tmp_path / "other"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    with pytest.raises(EditionError, match="not empty and holds no earlier student edition"):
        build.prepare_dest(other, course)
    earlier = tmp_path / "earlier"
    (earlier / ".git").mkdir(parents=True)
    (earlier / "notebooks").mkdir()
    (earlier / render.MARKER).write_text(render.MARKER_TEXT)
    build.prepare_dest(earlier, course)
    assert [p.name for p in earlier.iterdir()] == [".git"]


def test_commit_makes_one_commit_per_change(tmp_path):
    (tmp_path / "README.md").write_text("one\n")
    assert build.commit(tmp_path, ["01_a"]) is True
    assert build.commit(tmp_path, ["01_a"]) is False, "nothing changed: no commit"
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert log.stdout.splitlines() == ["PyTorch Essentials, student edition: 01_a"]


def test_an_unknown_lesson_is_exit_status_1_with_the_known_ones(tmp_path, capsys):
    assert build.main([str(tmp_path / "dest"), "--lesson", "99_nothing"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("student edition: unknown lesson(s): 99_nothing; known: 01_")
    assert not (tmp_path / "dest").exists()


def test_a_release_with_a_hidden_client_left_in_a_test_cell_is_refused():
    """A test cell that still imports or builds the hidden-observation client (the form lessons use since
    kernel/hidden.py) stops the build, even without an observe call."""
    from autograder.edition.contents import check_release

    cell = nbformat.v4.new_code_cell("from autograder.kernel.hidden import HiddenTests\n"
                                     "hidden = HiddenTests('01_tensors_and_views', 'test_x')\n")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                 "grade_id": "test_x"}
    with pytest.raises(EditionError, match="still holds hidden checks"):
        check_release("01_tensors_and_views", nbformat.v4.new_notebook(cells=[cell]))
