"""Every private name of another library the course uses resolves, with the parameters it is declared with
(autograder/kernel/private_apis.py, autograder/grading/private_apis.py); a changed one fails loudly, naming the
library and its version."""
from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import textwrap
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


# Underscore names the standard library documents as public (os._exit: "exit without calling cleanup handlers")
DOCUMENTED = {"os._exit"}
SCANNED = ("autograder", "deploy", "tests/support")
REGISTRIES = {Path("autograder/grading/private_apis.py"), Path("autograder/kernel/private_apis.py")}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _registered() -> set[str]:
    """Each underscore name a registry entry reaches through: its owner's parts and the name itself."""
    found = set()
    for entry in ENTRIES:
        found |= {part for part in re.split(r"[.:]", entry.owner) + [entry.name] if _private(part)}
    return found


def _trees() -> dict[Path, ast.Module]:
    """Every module of the scanned folders, and the Python source its string constants hold (a sitecustomize, a
    probe, a cell written by a test): a private name in either is a use."""
    trees = {}
    for folder in SCANNED:
        for path in sorted((course.REPO_ROOT / folder).rglob("*.py")):
            relative = path.relative_to(course.REPO_ROOT)
            tree = ast.parse(path.read_text())
            trees[relative] = tree
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
                    try:
                        trees[Path(f"{relative}:string@{node.lineno}")] = ast.parse(textwrap.dedent(node.value))
                    except SyntaxError:
                        pass
    return trees


def _own_names(trees) -> set[str]:
    """Every name this code defines or binds: a private name of its own is no other library's."""
    own = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
            elif isinstance(node, ast.alias):
                own.add(node.asname or node.name.split(".")[-1])
    return own


def _imports(tree) -> dict[str, str]:
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update({alias.asname: alias.name for alias in node.names if alias.asname})
            found.update({alias.name.split(".")[0]: alias.name.split(".")[0]
                          for alias in node.names if not alias.asname})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
    return found


def _external(imported: str | None) -> bool:
    return imported is not None and not imported.startswith(("autograder", "coursekit")) and "." not in imported[:1]


def _root(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _resolve(dotted: str):
    """The object a dotted path names (the longest importable module, then attributes), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                found = getattr(found, part)
        except AttributeError:
            return None
        return found
    return None


def _overrides(tree, imports: dict[str, str]):
    """Private methods a class defines over a base class of another library that has them (an override of a
    private hook is a use of it: renamed there, the override silently never runs)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = []
        for base in node.bases:
            dotted = ast.unparse(base)
            head = dotted.split(".")[0]
            if _external(imports.get(head)):
                bases += [found for found in [_resolve(imports[head] + dotted[len(head):])] if found is not None]
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                if any(hasattr(base, item.name) for base in bases):
                    yield item, item.name, f"{node.name}({', '.join(ast.unparse(b) for b in node.bases)})"


def private_uses() -> list[tuple[str, str]]:
    """(where, what) for each use of another library's private name: an attribute of a module or object of
    another library (or one this code never defines), read with ``.`` or ``getattr``/``setattr``/``hasattr``, or
    a private method overridden."""
    trees = _trees()
    own = _own_names(trees)
    found = []
    for relative, tree in trees.items():
        if Path(str(relative).split(":")[0]) in REGISTRIES:
            continue
        imports = _imports(tree)
        for node in ast.walk(tree):
            name, base = None, None
            if isinstance(node, ast.Attribute) and _private(node.attr):
                name, base = node.attr, node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and _private(node.args[1].value)):
                name, base = node.args[1].value, node.args[0]
            if name is None or _root(base) in ("self", "cls"):
                continue
            root = _root(base)
            if _external(imports.get(root)) or name not in own:
                found.append((f"{relative}:{node.lineno}", f"{ast.unparse(base)}.{name}", name))
        for node, name, owner in _overrides(tree, imports):
            found.append((f"{relative}:{node.lineno}", f"{owner}.{name} (overridden)", name))
    return found


def test_every_private_name_of_another_library_is_registered():
    """Each private name of another library the scan finds is declared in a registry and read through
    ``private_apis.get`` (so no direct use is left), or is a registered hook that this code overrides."""
    registered = _registered()
    outside = [f"{where}: {what}" for where, what, name in private_uses()
               if what not in DOCUMENTED and not (what.endswith("(overridden)") and name in registered)]
    assert not outside, ("private names of other libraries used outside the registries (declare each in "
                         "autograder/grading/private_apis.py or autograder/kernel/private_apis.py and read it with "
                         "private_apis.get):\n" + "\n".join(outside))
    assert {"_async_launch_kernel", "_backend_mod", "_instance", "_run_exitfuncs", "_forward_hooks",
            "_global_forward_hooks", "_C", "_default_context"} <= registered


def test_the_scan_sees_each_kind_of_use(tmp_path, monkeypatch):
    """Planted in a scanned folder: a module attribute, a getattr with a default, an object of an imported class,
    an override of a private hook and a private name inside a string of code; each is found."""
    planted = course.REPO_ROOT / "tests" / "support" / "_planted_private_scan_probe.py"
    planted.write_text(textwrap.dedent('''\
        import zmq
        from jupyter_client.manager import KernelManager
        from matplotlib import pyplot
        a = zmq.Context._instance_planted
        b = getattr(pyplot, "_backend_mod_planted", None)
        class Manager(KernelManager):
            async def _async_launch_kernel(self, cmd, **kw):
                pass
        CODE = "import atexit\\natexit._run_exitfuncs_planted()"
        '''))
    try:
        uses = {name for _, _, name in private_uses()}
    finally:
        planted.unlink()
    assert {"_instance_planted", "_backend_mod_planted", "_async_launch_kernel", "_run_exitfuncs_planted"} <= uses


@pytest.mark.parametrize("entry", [e for e in ENTRIES if getattr(e, "guards", False)], ids=lambda entry: entry.where)
def test_an_entry_that_guards_a_defence_fails_closed(entry):
    """Gone, it raises; it is never read with a default (a rename would silently disable the defence)."""
    with pytest.raises(kernel_side.PrivateAPIChanged, match="is gone"):
        kernel_side.get(dataclasses.replace(entry, name=entry.name + "_renamed"))
    with pytest.raises(TypeError, match="never read with a default"):
        kernel_side.get(entry, object(), None)


def test_the_warm_templates_fork_checks_fail_closed(monkeypatch):
    """template.unsafe_reason reads pyplot's backend and ZMQ's context through the registry: with either renamed
    it raises instead of answering "safe to fork"."""
    import matplotlib.pyplot  # noqa: F401  (the check reads it only where it is imported)

    from autograder.warm import template

    for entry in ("BACKEND_MOD", "ZMQ_INSTANCE"):
        with monkeypatch.context() as patch:
            import zmq  # noqa: F401

            patch.setattr(template.os, "listdir", lambda path: ["1"])   # one thread: the checks below run
            renamed = dataclasses.replace(getattr(grader_side, entry), name="_renamed_away")
            patch.setattr(grader_side, entry, renamed)
            with pytest.raises(kernel_side.PrivateAPIChanged):
                template.unsafe_reason()
