"""``autograder/grading/``'s stages import downward only.

The order, top to bottom, and why each stage sits where it does:

- the command (``cli.py``, ``pipeline.py``): the route itself; it may import any stage and no stage imports it;
- ``run``: the engine drives a class through every other stage (the worker pool, one submission or one
  assignment's reference each, its kernel and its channel);
- ``report``: what the results become (``grades.csv``, the report, shards joined); it asks the recorder for the
  scores, so it sits above ``record``;
- ``record``, ``judging``, ``intake``: a submission's route read backwards (the gradebook records the verdict, the
  verdict judges the notebook that intake rebuilt); none of the three imports another;
- ``plan``: what a run will do (settings, shards, the folders, each :class:`Job`), which every stage above reads;
  it checks that the host can sandbox, so it sits above ``isolate``;
- ``isolate``: the sandbox, a mechanism handed its limits: it knows no stage;
- the shared vocabulary (``messages.py``, ``status.py``, ``private_apis.py``): read by every stage, imports none.

An import from a stage to a stage above it (also one made inside a function) fails the test.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "autograder.grading"
COMMAND = ("cli", "pipeline")
STAGES = ("run", "report", "record", "judging", "intake", "plan", "isolate")
SHARED = ("messages", "status", "private_apis")


def rank(part: str) -> int | None:
    """0 for the command, then each stage from the top, the shared vocabulary last; None: not placed."""
    order = [COMMAND, *[(stage,) for stage in STAGES], SHARED]
    return next((i for i, names in enumerate(order) if part in names), None)


def imported(tree: ast.AST, module: str) -> list[tuple[str, int]]:
    """(first part below ``autograder.grading``, line) of every import of ``module``'s source into the package,
    at any depth (an import inside a function is a dependency too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # relative: from the importer's own package
                parent = module.split(".")[: -node.level]
                base = ".".join(parent + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] if base == PACKAGE else [base]
        else:
            continue
        found += [(name[len(PACKAGE) + 1:].split(".")[0], node.lineno) for name in names
                  if name.startswith(PACKAGE + ".")]
    return found


def violations(root: Path = ROOT) -> list[str]:
    """Each import of ``root``'s grading package that goes up a stage, as ``file:line: from -> to``."""
    found = []
    for path in sorted((root / "autograder" / "grading").rglob("*.py")):
        relative = path.relative_to(root)
        module = ".".join(relative.with_suffix("").parts)
        part = module[len(PACKAGE) + 1:].split(".")[0]
        if part == "__init__":
            continue
        for target, line in imported(ast.parse(path.read_text()), module):
            if rank(target) is not None and rank(part) is not None and rank(target) < rank(part):
                found.append(f"{relative}:{line}: {part} -> {target}")
    return found


def test_every_stage_imports_downward_only():
    found = violations()
    assert not found, ("imports from a stage to a stage above it (order, top to bottom: "
                       f"{' > '.join([*COMMAND, *STAGES, *SHARED])}):\n" + "\n".join(found))


def test_every_package_and_module_of_grading_is_placed():
    grading = ROOT / "autograder" / "grading"
    parts = {p.stem if p.is_file() else p.name for p in grading.iterdir()
             if p.name not in {"__init__.py", "__pycache__"} and (p.suffix == ".py" or p.is_dir())}
    assert {"run", "plan", "messages"} <= parts   # the scan sees the package
    assert not [p for p in parts if rank(p) is None], "place each new stage or module in this test's order"


def test_an_upward_import_is_caught(tmp_path):
    """The check can fail: a planted import from ``plan`` up to ``run`` and one inside a function of ``isolate``."""
    for name, source in {"plan/planted.py": "from autograder.grading.run.worker import grade_notebook\n",
                         "isolate/planted.py": "def f():\n    from autograder.grading import pipeline\n",
                         "status.py": "from . import messages\nfrom .intake import canonical\n",
                         "run/fine.py": "from autograder.grading.plan import job\nfrom ..isolate import sandbox\n"
                         }.items():
        (tmp_path / "autograder" / "grading" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "autograder" / "grading" / name).write_text(source)
    assert violations(tmp_path) == ["autograder/grading/isolate/planted.py:2: isolate -> pipeline",
                                    "autograder/grading/plan/planted.py:1: plan -> run",
                                    "autograder/grading/status.py:2: status -> intake"]
