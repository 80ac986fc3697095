"""CUDA-only notebook cells (tag ``requires-cuda``): skipped and listed without CUDA, never skipped with it.

Each test runs pytest + nbval in a subprocess on a tiny notebook written to ``tmp_path``,
with the hooks of ``tests/conftest.py`` loaded as a plugin (``-p conftest``), exactly as the
GPU runner loads them. ``CUDA_VISIBLE_DEVICES=""`` hides any GPU, so the CPU behaviour is
tested on every machine; the CUDA behaviour is tested for real on a CUDA machine and, with
``torch.cuda.is_available`` patched in the pytest process only, everywhere.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from autograder import course

TESTS = Path(__file__).resolve().parent
CUDA_CELL = 'import torch\nassert torch.cuda.is_available()\nprint("ran on", torch.cuda.get_device_name(0))'


def tiny_notebook(path: Path, cuda_tags=("requires-cuda", "nbval-ignore-output"), second_cuda_tags=None) -> Path:
    """Plain cell, CUDA-only cell (tagged), [a second CUDA-only cell,] plain cell with an output nbval compares."""
    cells = [nbformat.v4.new_code_cell("x = 20", id="plain-1")]
    for number, tags in enumerate([cuda_tags, second_cuda_tags], start=2):
        if tags:
            cells.append(nbformat.v4.new_code_cell(CUDA_CELL, id=f"cuda-{number}", metadata={"tags": list(tags)}))
    last = nbformat.v4.new_code_cell("print(x + 1)", id="plain-9")
    last.outputs = [nbformat.v4.new_output("stream", name="stdout", text="21\n")]
    cells.append(last)
    for count, cell in enumerate(cells, start=1):
        cell.execution_count = count
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def run_nbval(notebook: Path, *, hide_gpu: bool, extra_env: dict | None = None,
              plugins: tuple[str, ...] = (), extra_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PTE_EXPECT_CUDA", None)
    env["PYTHONPATH"] = os.pathsep.join([str(notebook.parent), str(TESTS), str(course.REPO_ROOT),
                                         env.get("PYTHONPATH", "")])
    if hide_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra_env or {})
    command = [sys.executable, "-m", "pytest", *[arg for p in plugins for arg in ("-p", p)], "-p", "conftest",
               "-p", "no:cacheprovider", "-o", "addopts=", "--nbval", "--nbval-current-env", "-ra", "-v",
               *extra_args, notebook.name]
    return subprocess.run(command, cwd=notebook.parent, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a pytest session in a subprocess: make test, not test-quick
def test_cuda_cells_are_skipped_and_listed_without_cuda(tmp_path):
    notebook = tiny_notebook(tmp_path / "tiny.ipynb", second_cuda_tags=("requires-cuda", "nbval-ignore-output"))
    result = run_nbval(notebook, hide_gpu=True)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "2 passed, 2 skipped" in out, out
    skipped = sorted(line for line in out.splitlines() if line.startswith("SKIPPED"))
    assert skipped == ["SKIPPED [1] tiny.ipynb: requires CUDA (not available here): Cell 1 (id cuda-2)",
                       "SKIPPED [1] tiny.ipynb: requires CUDA (not available here): Cell 2 (id cuda-3)"], out


def test_cuda_cells_run_and_nothing_is_skipped_with_cuda(tmp_path):
    """On a CUDA machine this fails if a requires-cuda cell was skipped (or did not pass)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: this checks that CUDA-only cells run where CUDA is available")
    result = run_nbval(tiny_notebook(tmp_path / "tiny.ipynb"), hide_gpu=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "3 passed" in out and "skipped" not in out.lower(), out
    assert "Cell 1 PASSED" in out, out


@pytest.mark.slow  # a pytest session in a subprocess: make test, not test-quick
def test_expecting_cuda_without_it_is_an_error(tmp_path):
    result = run_nbval(tiny_notebook(tmp_path / "tiny.ipynb"), hide_gpu=True, extra_env={"PTE_EXPECT_CUDA": "1"})
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "PTE_EXPECT_CUDA=1 but torch.cuda.is_available() is False" in out, out
    assert "passed" not in out, out


@pytest.mark.slow  # a pytest session in a subprocess: make test, not test-quick
@pytest.mark.parametrize("workers", [None, "2"], ids=["one process", "xdist"])
def test_a_cuda_cell_that_did_not_run_fails_a_cuda_run(tmp_path, workers):
    """With CUDA available, a requires-cuda cell skipped some other way (here nbval-skip) fails the session.

    ``torch.cuda.is_available`` is patched in the pytest processes only: the kernel has no CUDA,
    so the other CUDA cell runs and fails, and counts as run. Under pytest-xdist (as `make test`
    runs) the workers report to the controller, which decides.
    """
    (tmp_path / "fake_cuda.py").write_text("import torch\ntorch.cuda.is_available = lambda: True\n")
    notebook = tiny_notebook(tmp_path / "tiny.ipynb", cuda_tags=("requires-cuda", "nbval-skip"),
                             second_cuda_tags=("requires-cuda", "nbval-ignore-output"))
    extra = ("-n", workers, "--dist", "loadfile") if workers else ()
    result = run_nbval(notebook, hide_gpu=True, plugins=("fake_cuda",), extra_args=extra)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 failed, 2 passed, 1 skipped" in out, out
    missing = out.split("did not run (nothing may be skipped on a CUDA run):\n")[1].split("\n\n")[0]
    assert missing.split() == ["tiny.ipynb::Cell", "1"], out


@pytest.mark.parametrize("lesson", course.lessons())
def test_lesson_cuda_cells_are_guarded_and_not_compared(lesson):
    """A requires-cuda cell runs on a student's CPU without error and its output is never compared."""
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "requires-cuda" not in tags:
            continue
        assert cell.cell_type == "code", f"{lesson}: only code cells can require CUDA"
        assert "nbval-ignore-output" in tags, f"{lesson}: cell {cell.get('id')} needs nbval-ignore-output too"
        assert "cuda_or_skip(" in cell.source or "torch.cuda.is_available()" in cell.source, (
            f"{lesson}: cell {cell.get('id')} must check for CUDA itself, so Run All on a laptop does not fail")


# ---------------------------------------------------------------- .ci/gpu-test.sh, dry runs on this machine

def run_gpu_script(tmp_path: Path, notebook=None, **settings: str) -> tuple[int, str, str]:
    """Run .ci/gpu-test.sh on a course of one tiny lesson; returns (exit code, stdout, stdout + stderr)."""
    lesson = tmp_path / "solutions" / "00_tiny"
    lesson.mkdir(parents=True)
    if notebook is None:
        tiny_notebook(lesson / "00_tiny.ipynb")
    else:
        nbformat.write(notebook, lesson / "00_tiny.ipynb")
    env = dict(os.environ, GPU_TEST_SOLUTIONS=str(tmp_path / "solutions"), CUDA_VISIBLE_DEVICES="",
               PYTHON=sys.executable, **settings)
    env.pop("PTE_EXPECT_CUDA", None)
    result = subprocess.run(["bash", str(course.REPO_ROOT / ".ci" / "gpu-test.sh")], env=env,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stdout + result.stderr


def summary_rows(stdout: str) -> dict[str, list[str]]:
    table = stdout.split("== GPU test summary")[1].splitlines()[3:]
    return {line[:40].strip(): line[40:].split() for line in table if line.strip() and not line.startswith("-")}


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["nbval", "nbclient", "exec"])
def test_gpu_script_dry_run_runs_counts_and_skips(tmp_path, runner):
    code, stdout, out = run_gpu_script(tmp_path, GPU_TEST_ALLOW_CPU="1", GPU_TEST_RUNNER=runner)
    assert code == 0, out
    assert "torch    " in stdout and "GPU      none" in stdout and f"runner   {runner}" in stdout, out
    rows = summary_rows(stdout)
    assert rows["00_tiny"] == ["2", "1", "2", "0", "ok"], out          # run, skipped, passed, failed, status
    assert rows["08 CUDA assertions (tests/test_amp.py)"][-1] == "ok", out
    assert rows["total"][-1] == "ok", out
    assert stdout.rstrip().splitlines()[-1].startswith("total"), "the summary table comes last"


@pytest.mark.slow
def test_gpu_script_fails_without_cuda(tmp_path):
    code, stdout, out = run_gpu_script(tmp_path)
    assert code == 1, out
    assert "CUDA is not available" in stdout and summary_rows(stdout)["(no CUDA)"][-1] == "FAIL", out


@pytest.mark.slow
def test_gpu_script_reports_a_failing_cell(tmp_path):
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise ValueError('boom')", id="bad-1")])
    code, stdout, out = run_gpu_script(tmp_path, broken, GPU_TEST_ALLOW_CPU="1", GPU_TEST_RUNNER="exec")
    assert code == 1, out
    assert summary_rows(stdout)["00_tiny"] == ["1", "0", "0", "1", "FAIL"], out
    assert "ValueError: boom" in stdout, out
