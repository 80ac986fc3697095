"""Every test lives in a layer folder whose conftest.py marks it; make test-quick is the quick layers."""
from __future__ import annotations

from pathlib import Path

import grouping

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_lives_in_a_layer():
    stray = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
             if p.parent.name not in grouping.LAYERS or p.parent.parent != TESTS]
    assert not stray, f"test files outside tests/unit, tests/course, tests/e2e: {stray}"


def test_every_layer_marks_its_tests():
    for layer in grouping.LAYERS:
        conftest = (TESTS / layer / "conftest.py").read_text()
        assert "mark_layer(__file__" in conftest and repr(layer) in conftest, f"tests/{layer}/conftest.py"
    assert "\"slow\"" in (TESTS / "e2e" / "conftest.py").read_text().replace("'", '"')


def test_every_collected_test_has_its_layer_mark(request):
    """A unit or course test is slow only where it says so itself, e2e tests are slow by their folder."""
    items = request.session.items
    for item in items:
        layer = Path(str(item.fspath)).resolve().relative_to(TESTS).parts[0] if TESTS in Path(
            str(item.fspath)).resolve().parents else None
        if layer in grouping.LAYERS:
            assert item.get_closest_marker(layer), f"{item.nodeid} lacks its layer mark {layer!r}"
        if layer == "e2e":
            assert item.get_closest_marker("slow"), f"{item.nodeid} is end to end but not marked slow"
