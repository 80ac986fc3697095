"""The import graph of the student edition: which modules of the kernel package the shipped notebooks and
``make check`` import, directly or through each other, and every module that shipped code imports (the
third-party ones decide the students' pins). Read from the code with ``ast``; nothing is imported."""
from __future__ import annotations

import ast
from pathlib import Path

from .errors import EditionError

SELFCHECK = "autograder.kernel.selfcheck"   # `make check`
ROOTS = {SELFCHECK, "autograder.kernel"}      # shipped whatever the notebooks import


def code_of_notebook(path: Path) -> list[str]:
    """The sources of a notebook's code cells."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _parse(source: str) -> ast.AST | None:
    try:
        return ast.parse(source)
    except SyntaxError:   # IPython magics and shell escapes: drop them and try again
        kept = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
        try:
            return ast.parse(kept)
        except SyntaxError:
            return None


def imports_of(sources: dict[str, list[str]]) -> dict[str, set[str]]:
    """Absolute imports in ``sources`` (where -> code): module -> where; ``from m import n`` gives ``m`` and ``m.n``."""
    found: dict[str, set[str]] = {}
    for where, chunks in sources.items():
        for chunk in chunks:
            tree = _parse(chunk)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        found.setdefault(alias.name, set()).add(where)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.setdefault(node.module, set()).add(where)
                    for alias in node.names:
                        found.setdefault(f"{node.module}.{alias.name}", set()).add(where)
    return found


def _module_file(module: str, package: dict[Path, str]) -> Path | None:
    """The file of ``module`` among ``package`` (relative path -> source), ``None`` if it is not there."""
    base = Path(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate in package:
            return candidate
    return None


def _defined_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_autograder_modules(imported: dict[str, set[str]], package: dict[Path, str]) -> dict[str, set[str]]:
    """``autograder`` imports that the shipped package (relative path -> source) cannot satisfy: module -> where."""
    missing = {}
    for module, where in imported.items():
        if module.split(".")[0] != "autograder" or _module_file(module, package):
            continue
        parent, _, name = module.rpartition(".")
        parent_file = _module_file(parent, package) if parent else None
        if parent_file and (parent_file.name != "__init__.py" or name in _defined_names(package[parent_file])):
            continue   # a name defined in a shipped module (`from autograder.kernel.checks import CheckFailed`)
        missing[module] = where
    # `from autograder.data import a, b` is one finding, not three
    return {m: w for m, w in missing.items() if not any(m.startswith(other + ".") for other in missing)}


def _module_name(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of_module(rel: Path, source: str) -> set[str]:
    """Absolute names a package module imports, relative imports resolved (``from m import n`` gives m and m.n)."""
    package = _module_name(rel) if rel.name == "__init__.py" else _module_name(rel).rpartition(".")[0]
    names: set[str] = set()
    tree = _parse(source)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def needed_modules(package: dict[Path, str], roots: set[str]) -> set[Path]:
    """The package files that ``roots`` (module names) import, directly or through each other, with their packages."""
    needed: set[Path] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        rel = _module_file(name, package)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]     # parent packages
        if rel is None or rel in needed:
            continue
        needed.add(rel)
        todo += [m for m in _imports_of_module(rel, package[rel]) if m.split(".")[0] == "autograder"]
    return needed


def shipped_package(package: dict[Path, str], notebook_code: dict[str, list[str]]
                    ) -> tuple[dict[Path, str], dict[str, set[str]]]:
    """The files of ``package`` (relative path -> source) that the notebooks (``notebook_code``: where -> code
    cells) and ``make check`` import, directly or through each other (an edition of some lessons carries no
    helper of a lesson it leaves out), and every import of the notebooks and those files (module -> where).
    Every ``autograder`` module they import must be among them, else :class:`EditionError`."""
    roots = {m for m in imports_of(notebook_code) if m.split(".")[0] == "autograder"} | ROOTS
    keep = needed_modules(package, roots)
    kept = {rel: text for rel, text in package.items() if rel in keep}
    sources = {str(rel): [text] for rel, text in kept.items()}
    sources.update(notebook_code)
    imported = imports_of(sources)
    missing = missing_autograder_modules(imported, kept)
    if missing:
        details = "; ".join(f"{m} ({', '.join(sorted(w))})" for m, w in sorted(missing.items()))
        raise EditionError(f"the edition would not ship modules that its code imports: {details}. "
                           "Lesson helpers belong in autograder/kernel/; regenerate stale notebooks with "
                           "`make release`.")
    return kept, imported
