"""notebooks/ is generated from solutions/ and leaks neither solutions nor hidden tests."""
from __future__ import annotations

import re
import shutil

import nbformat
import pytest

from autograder import course

import coursekit as kit

LESSONS = course.lessons()


def comparable(nb) -> list[tuple]:
    """What a student sees of a notebook: per cell its type, id, source and nbgrader metadata."""
    return [
        (c.cell_type, c.get("id"), c.source, c.get("metadata", {}).get("nbgrader"),
         c.get("metadata", {}).get("tags"))
        for c in nb.cells
    ]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    shutil.copy(kit.REPO / "nbgrader_config.py", root)
    for lesson in LESSONS:
        shutil.copytree(kit.REPO / "solutions" / lesson, root / "solutions" / lesson)
    course.generate_release(root, LESSONS)
    return root


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_is_in_sync(regenerated, lesson):
    fresh = nbformat.read(regenerated / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    committed = nbformat.read(kit.REPO / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    assert comparable(fresh) == comparable(committed), (
        f"notebooks/{lesson} differs from what solutions/{lesson} generates: run `make release`")


def test_release_has_exactly_the_lessons():
    released = sorted(p.name for p in (kit.REPO / "notebooks").iterdir() if p.is_dir())
    assert released == course.lessons(narrowed=False)


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_leaks_no_solution_or_hidden_test(lesson):
    release = nbformat.read(kit.REPO / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    source = nbformat.read(course.solution_path(lesson), as_version=4)
    text = "\n".join(c.source for c in release.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    assert all(not c.get("outputs") for c in release.cells if c.cell_type == "code"), (
        "release must ship without outputs")
    released = kit.exercises(release)
    for name, entry in kit.exercises(source).items():
        body = "\n".join(re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", entry["solution"].source, re.S))
        stub = released[name]["solution"].source
        assert "raise NotImplementedError()" in stub
        for line in body.splitlines():
            if len(line.strip()) > 10:  # shorter lines (`model(x)`) also occur in docstrings and prose
                assert line.strip() not in stub, f"{lesson}/{name}: solution line leaked: {line.strip()}"
        hidden = entry["test"].source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
        released_test = released[name]["test"].source
        visible = entry["test"].source.split("### BEGIN HIDDEN TESTS")[0]
        for line in hidden.splitlines():
            # a fragment the visible part also holds (a shared keyword argument, say) is no leak
            if len(line.strip()) > 12 and line.strip() not in visible:
                assert line.strip() not in released_test, f"{lesson}/test_{name}: hidden line leaked: {line.strip()}"
        signature = next(line for line in entry["solution"].source.splitlines()
                         if line.startswith(("def ", "class ")))
        assert signature in stub, f"{lesson}/{name}: the stub must keep the signature"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_test_cell_is_tagged_raises_exception(lesson):
    """Run All in JupyterLab goes on past an unsolved exercise's failing test only where the test cell is tagged
    ``raises-exception`` (test_browser.py proves what the tag does, and that Run All stops without it, on the first
    lesson's release): every test cell of every committed release carries it, and no other cell does."""
    release = nbformat.read(kit.REPO / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    tests = {name: entry["test"] for name, entry in kit.exercises(release).items()}
    assert tests, f"notebooks/{lesson} has no test cell"
    untagged = [name for name, cell in tests.items() if "raises-exception" not in cell.metadata.get("tags", [])]
    assert not untagged, f"notebooks/{lesson}: test cells without raises-exception (run `make release`): {untagged}"
    solution = nbformat.read(course.solution_path(lesson), as_version=4)
    tagged_before = {c.get("id") for c in solution.cells if "raises-exception" in c.metadata.get("tags", [])}
    others = [c.get("id") for c in release.cells if "raises-exception" in c.metadata.get("tags", [])
              and not kit.nbgrader_meta(c).get("grade") and c.get("id") not in tagged_before]
    assert not others, f"notebooks/{lesson}: the release tagged cells that are not tests: {others}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_execution_timestamps(lesson):
    """Stored notebooks carry no per-run timing metadata (it would change on every release)."""
    for folder in ("solutions", "notebooks"):
        nb = nbformat.read(kit.REPO / folder / lesson / f"{lesson}.ipynb", as_version=4)
        assert not any("execution" in c.get("metadata", {}) for c in nb.cells), f"{folder}/{lesson}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_carries_no_widget_state(regenerated, lesson):
    """The solution run's widget state (what its widgets showed) stays out of the student's copy."""
    for root in (regenerated, kit.REPO):
        nb = nbformat.read(root / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
        assert "widgets" not in nb.metadata, f"{root.name}/notebooks/{lesson} holds widget state: run `make release`"


@pytest.mark.parametrize("lesson", LESSONS)
def test_reference_observations_stay_with_the_source(regenerated, lesson):
    """`make release` stored the reference for every graded test; neither release holds it."""
    import json

    reference = json.loads((course.solution_path(lesson).parent / course.REFERENCE_FILE).read_text())
    tests = {f"test_{name}" for name in kit.exercises(nbformat.read(course.solution_path(lesson), as_version=4))}
    assert set(reference["cells"]) == tests, f"{lesson}: run `make release` (the reference is out of date)"
    assert all(reference["cells"][t] for t in tests), f"{lesson}: a graded test makes no hidden observation"
    for root in (kit.REPO, regenerated):
        assert not list((root / "notebooks" / lesson).rglob(course.REFERENCE_FILE)), "reference file released"
