"""The pip requirements and environment.yml pin the same direct dependencies, exactly."""
from __future__ import annotations

import re
from importlib import metadata

import yaml

import coursekit as kit

# conda-forge names that differ from PyPI names
CONDA_TO_PIP = {"pytorch": "torch"}


def pip_pins() -> dict[str, str]:
    pins = {}
    for line in (kit.REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9.]*)", line)
            assert match, f"requirements.txt: '{line}' is not an exact pin (name==version)"
            pins[match[1].lower()] = match[2]
    return pins


def conda_pins() -> dict[str, str]:
    env = yaml.safe_load((kit.REPO / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    pins = {}
    for dep in env["dependencies"]:
        assert isinstance(dep, str), "environment.yml: keep every dependency a conda package"
        name, _, version = dep.partition("=")
        assert version and "=" not in version and "*" not in version, f"environment.yml: '{dep}' is not exact"
        if name != "python":
            pins[CONDA_TO_PIP.get(name, name).lower()] = version
    return pins


def test_requirements_and_environment_agree():
    assert pip_pins() == conda_pins()


def test_environment_yml_explains_every_dependency():
    for line in (kit.REPO / "environment.yml").read_text().splitlines():
        if line.strip().startswith("- ") and not line.strip().startswith("- conda-forge"):
            assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, f"no reason given: {line.strip()}"


def test_python_is_311():
    env = yaml.safe_load((kit.REPO / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]


def test_installed_versions_match_the_pins():
    """The venv that runs the tests is the pinned one (torch 2.13.0 in particular)."""
    for name, version in pip_pins().items():
        installed = metadata.version(name)
        assert installed.split("+")[0] == version, f"{name}: installed {installed}, pinned {version}"


def test_reading_a_notebook_builds_no_grammars():
    """jsonschema 4.25+ imports rfc3987-syntax with nbformat, which compiles Lark grammars for 1.3 s in every
    process that reads a notebook: the grader, each of its workers, every nbgrader call."""
    import subprocess
    import sys

    probe = "import sys, nbformat; print(sorted({'rfc3987_syntax', 'lark'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", f"importing nbformat also imported {loaded.strip()}"
