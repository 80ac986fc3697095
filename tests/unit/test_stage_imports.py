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

Across the trust line, the grader and the kernel share one vocabulary, ``autograder/kernel/vocabulary/`` (the
observation format, the messages, the notebook protocol and the reference file): the grader imports from
``autograder/kernel/`` only that and the few modules listed in ``GRADER_READS_OF_KERNEL`` (never the checks, the
hidden client or a lesson's instruments), and the vocabulary imports nothing else of the kernel but the registry
of private names.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "autograder.grading"
COMMAND = ("cli", "pipeline")
STAGES = ("run", "report", "record", "judging", "intake", "plan", "isolate")
SHARED = ("messages", "status", "private_apis")
KERNEL = "autograder.kernel"
VOCABULARY = f"{KERNEL}.vocabulary"
# module of autograder/kernel/ (besides the vocabulary) -> why the grader reads it
GRADER_READS_OF_KERNEL = {
    "paths": "where the repository and its data are: the sandbox binds them, the reference cache key hashes them",
    "outputcap": "the kernel extension the runner loads in every kernel, its environment variable and exception",
    "private_apis": "the one registry of other libraries' private names (the grader's own registry extends it)",
}


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


def kernel_imports(tree: ast.AST) -> set[str]:
    """Every module or name of ``autograder.kernel`` a module imports (``from autograder.kernel import x``: x)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {f"{node.module}.{alias.name}" if node.module == KERNEL else node.module for alias in node.names}
    return {name for name in found if name == KERNEL or name.startswith(KERNEL + ".")}


def outside_vocabulary(root: Path, folder: str, allowed: set[str]) -> list[str]:
    """Imports of ``autograder.kernel`` by the modules under ``root/folder`` other than the vocabulary and
    ``allowed`` (modules of the kernel package), as ``file: module``."""
    found = []
    for path in sorted((root / folder).rglob("*.py")):
        for name in sorted(kernel_imports(ast.parse(path.read_text()))):
            if not (name == VOCABULARY or name.startswith(VOCABULARY + ".")
                    or name.split(".")[2] in allowed and len(name.split(".")) == 3):
                found.append(f"{path.relative_to(root)}: {name}")
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


def test_the_grader_reads_of_the_kernel_only_the_vocabulary():
    assert (ROOT / "autograder" / "kernel" / "vocabulary" / "protocol.py").is_file()
    found = outside_vocabulary(ROOT, "autograder/grading", set(GRADER_READS_OF_KERNEL))
    assert not found, ("the grader imports of autograder/kernel/ only its vocabulary and GRADER_READS_OF_KERNEL; "
                       "what it needs of the kernel's side belongs in the vocabulary:\n" + "\n".join(found))
    readers = {name.split(":")[1].strip().split(".")[2] for name in
               outside_vocabulary(ROOT, "autograder/grading", set())}
    assert readers == set(GRADER_READS_OF_KERNEL), "a listed module the grader no longer reads: remove it"


def test_the_vocabulary_needs_nothing_else_of_the_kernel():
    found = outside_vocabulary(ROOT, "autograder/kernel/vocabulary", {"private_apis"})
    assert not found, "the vocabulary is imported by both sides: it may import only itself:\n" + "\n".join(found)


def test_a_reach_past_the_vocabulary_is_caught(tmp_path):
    (tmp_path / "autograder" / "grading").mkdir(parents=True)
    (tmp_path / "autograder" / "grading" / "judge.py").write_text(
        "from autograder.kernel import checks, paths\nfrom autograder.kernel.vocabulary import protocol\n"
        "from autograder.kernel.hidden import HiddenTests\nimport autograder.kernel.lessons.spirals\n")
    assert outside_vocabulary(tmp_path, "autograder/grading", {"paths"}) == [
        "autograder/grading/judge.py: autograder.kernel.checks",
        "autograder/grading/judge.py: autograder.kernel.hidden",
        "autograder/grading/judge.py: autograder.kernel.lessons.spirals"]
