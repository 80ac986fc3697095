"""The GPU runner (autograder/gpu_runner/, run by .ci/gpu-test.sh) and its CUDA-only cells.

CUDA-only notebook cells (tag ``requires-cuda``) are skipped and listed without CUDA, never
skipped with it. Those tests run pytest + nbval in a subprocess on a tiny notebook written to
``tmp_path``, with the hooks of ``tests/conftest.py`` loaded as a plugin (``-p conftest``),
exactly as the GPU runner loads them. ``CUDA_VISIBLE_DEVICES=""`` hides any GPU, so the CPU
behaviour is tested on every machine; the CUDA behaviour is tested for real on a CUDA machine
and, with ``torch.cuda.is_available`` patched in the pytest process only, everywhere.

The runner's pieces (settings, budget, lesson discovery, the choice of a runner, judging, JUnit counts,
the summary table and the exit status, the run without CUDA) are unit-tested by importing its modules; dry runs of
``.ci/gpu-test.sh`` on this machine (``GPU_TEST_ALLOW_CPU=1``) test the whole path, one per runner.
"""
from __future__ import annotations

import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from autograder import course, gpu_runner
from autograder.gpu_runner import cli, report, runners, settings

TESTS = Path(__file__).resolve().parents[1]   # tests/: its conftest.py
CUDA_CELL = 'import torch\nassert torch.cuda.is_available()\nprint("ran on", torch.cuda.get_device_name(0))'
NO_CUDA_CELL = 'raise AssertionError("a CUDA-only cell in a kernel without CUDA")'


def tiny_notebook(path: Path, cuda_tags=("requires-cuda", "nbval-ignore-output"), second_cuda_tags=None,
                  cuda_cell: str = CUDA_CELL) -> Path:
    """Plain cell, CUDA-only cell (tagged), [a second CUDA-only cell,] plain cell with an output nbval compares."""
    cells = [nbformat.v4.new_code_cell("x = 20", id="plain-1")]
    for number, tags in enumerate([cuda_tags, second_cuda_tags], start=2):
        if tags:
            cells.append(nbformat.v4.new_code_cell(cuda_cell, id=f"cuda-{number}", metadata={"tags": list(tags)}))
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
# one xdist worker: the notebook is one file and --dist loadfile gives a file to one worker, so a second worker
# (until issue 47) started, imported torch and ran nothing
@pytest.mark.parametrize("workers", [None, "1"], ids=["one process", "xdist"])
def test_a_cuda_cell_that_did_not_run_fails_a_cuda_run(tmp_path, workers):
    """With CUDA available, a requires-cuda cell skipped some other way (here nbval-skip) fails the session.

    ``torch.cuda.is_available`` is patched in the pytest processes that collect only: the kernel has no CUDA,
    so the other CUDA cell runs and fails, and counts as run. Under pytest-xdist (as `make test`
    runs) the workers report to the controller, which decides. That cell fails without importing torch in the
    kernel (NO_CUDA_CELL: what it runs does not matter here, only that it ran; until issue 47 each kernel paid a
    torch import to fail).
    """
    # patched where the cells are collected, before tests/conftest.py asks: the xdist controller never asks, so it
    # does not import torch (until issue 47 it did, for nothing)
    (tmp_path / "fake_cuda.py").write_text("import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
                                           "def pytest_collection_modifyitems():\n    import torch\n"
                                           "    torch.cuda.is_available = lambda: True\n")
    notebook = tiny_notebook(tmp_path / "tiny.ipynb", cuda_tags=("requires-cuda", "nbval-skip"),
                             second_cuda_tags=("requires-cuda", "nbval-ignore-output"), cuda_cell=NO_CUDA_CELL)
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

def run_gpu_script(tmp_path: Path, broken=None, second_cuda_tags=None, **variables: str) -> tuple[int, str, str]:
    """Run .ci/gpu-test.sh (``variables``: its GPU_TEST_* settings) on a course of one tiny lesson (and a second
    one, ``01_broken``, holding the notebook ``broken`` where given); returns (exit code, stdout, stdout + stderr)."""
    lesson = tmp_path / "solutions" / "00_tiny"
    lesson.mkdir(parents=True)
    tiny_notebook(lesson / "00_tiny.ipynb", second_cuda_tags=second_cuda_tags)
    if broken is not None:
        (tmp_path / "solutions" / "01_broken").mkdir()
        nbformat.write(broken, tmp_path / "solutions" / "01_broken" / "01_broken.ipynb")
    env = dict(os.environ, GPU_TEST_SOLUTIONS=str(tmp_path / "solutions"), CUDA_VISIBLE_DEVICES="",
               PYTHON=sys.executable, **variables)
    env.pop("PTE_EXPECT_CUDA", None)
    result = subprocess.run(["bash", str(course.REPO_ROOT / ".ci" / "gpu-test.sh")], env=env,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stdout + result.stderr


def summary_rows(stdout: str) -> dict[str, list[str]]:
    table = stdout.split("== GPU test summary")[1].splitlines()[3:]
    return {line[:40].strip(): line[40:].split() for line in table if line.strip() and not line.startswith("-")}


BROKEN = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise ValueError('boom')", id="bad-1")])


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["nbval", "nbclient"])
def test_gpu_script_dry_run_runs_counts_and_skips(tmp_path, runner):
    """A dry run of the whole script with each runner: versions first, counts per lesson, the summary table last.

    The nbclient run also holds a lesson whose cell fails (``01_broken``): it is counted and reported with its
    error, the step after it (the CUDA assertions) still runs, the total says FAIL (1) and the exit status is 1.
    That used to be a third run of the script of its own (one more pytest session for the CUDA assertions, one
    more kernel) on a course of the failing lesson alone: beside a passing lesson in this run it proves the same,
    and also that one bad lesson does not stop the rest. The nbval run keeps the all-passing course, so exit
    status 0 is still proven through the script.

    The nbval run's lesson holds two CUDA-only cells: without CUDA, tests/conftest.py's hook (loaded with
    ``-p conftest``, as the runner loads it) skips both and lists each by cell and id. That was a pytest session of
    its own on the same notebook (test_cuda_cells_are_skipped_and_listed_without_cuda, until issue 47).
    """
    broken = BROKEN if runner == "nbclient" else None
    second = ("requires-cuda", "nbval-ignore-output") if runner == "nbval" else None
    code, stdout, out = run_gpu_script(tmp_path, broken, second, GPU_TEST_ALLOW_CPU="1", GPU_TEST_RUNNER=runner)
    assert code == (1 if broken else 0), out
    assert "torch    " in stdout and "GPU      none" in stdout and f"runner   {runner}" in stdout, out
    rows = summary_rows(stdout)
    skipped = "2" if second else "1"
    assert rows["00_tiny"] == ["2", skipped, "2", "0", "ok"], out          # run, skipped, passed, failed, status
    if second:
        listed = sorted(line.split("00_tiny.ipynb: ", 1)[1] for line in stdout.splitlines()
                        if line.startswith("SKIPPED") and "00_tiny.ipynb: " in line)
        assert listed == ["requires CUDA (not available here): Cell 1 (id cuda-2)",
                          "requires CUDA (not available here): Cell 2 (id cuda-3)"], out
    assert rows["08 CUDA assertions (unit/test_amp.py)"][-1] == "ok", out
    assert rows["total"][-2:] == (["FAIL", "(1)"] if broken else [rows["total"][-2], "ok"]), out   # one bad row
    if broken:
        assert rows["01_broken"] == ["1", "0", "0", "1", "FAIL"], out
        assert "ValueError: boom" in stdout, out
    assert stdout.rstrip().splitlines()[-1].startswith("total"), "the summary table comes last"


def test_without_cuda_the_run_fails(tmp_path, monkeypatch, capsys):
    """Without CUDA and without GPU_TEST_ALLOW_CPU=1 nothing runs: a "(no CUDA)" row says FAIL, the exit status is 1,
    and CUDA was expected (PTE_EXPECT_CUDA=1 for the run's processes). The run is called in this process (a dry run
    of the script of its own until issue 47: the script's exit status is the run's, as both dry runs prove)."""
    for name in ("PYTHONPATH", "PYTHONUNBUFFERED", "PTE_EXPECT_CUDA"):   # prepare() sets them for the run's processes
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # an empty course and a spent budget: were the check for CUDA lost, nothing would run either
    code = cli.run_all(settings.Settings(solutions=tmp_path), tmp_path, settings.Budget(10))
    out = capsys.readouterr().out
    assert code == 1, out
    assert "CUDA is not available" in out and summary_rows(out)["(no CUDA)"][-1] == "FAIL", out
    assert os.environ["PTE_EXPECT_CUDA"] == "1", "a CUDA run must fail where a requires-cuda cell did not run"


# ---------------------------------------------------------------- autograder.gpu_runner, unit by unit

PACKAGE = Path(gpu_runner.__file__).parent


def test_runner_imports_only_the_standard_library():
    """The GPU machine may have nothing but a Python with torch: importing the runner needs no other package."""
    modules = sorted(f"autograder.gpu_runner.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE)])
                     if m.name != "__main__")
    assert "autograder.gpu_runner.cli" in modules, modules
    code = (f"import importlib, json, sys; before = set(sys.modules); [importlib.import_module(m) for m in {modules}]; "
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=course.REPO_ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    tops = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert tops - set(sys.stdlib_module_names) - {"autograder"} == set(), done.stdout


def test_shell_entry_is_a_few_lines_and_runs_the_module():
    text = (course.REPO_ROOT / ".ci" / "gpu-test.sh").read_text()
    code = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 12, code
    assert "<<" not in text, "no program in a heredoc: the runner is autograder/gpu_runner/"
    assert "-m autograder.gpu_runner" in text


def test_every_setting_the_runner_reads_is_documented():
    text = "\n".join(path.read_text() for path in sorted(PACKAGE.glob("*.py")))
    read = set(re.findall(r"env(?:\.get\(|\[)\"(GPU_TEST_\w+)\"", text))
    assert {"GPU_TEST_RUNNER", "GPU_TEST_LESSONS", "GPU_TEST_SOLUTIONS", "GPU_TEST_ALLOW_CPU",
            "GPU_TEST_BUDGET_S"} <= read, read
    for name in read | {"PYTHON"}:
        assert f"``{name}=" in gpu_runner.__doc__, f"{name} is not in autograder/gpu_runner/__init__.py's docstring"


def test_settings_from_the_environment():
    default = settings.Settings.from_env({})
    assert (default.runner, default.lessons, default.allow_cpu, default.budget_s) == ("auto", [], False, 570.0)
    assert default.solutions == course.REPO_ROOT / "solutions"
    chosen = settings.Settings.from_env({"GPU_TEST_RUNNER": "nbclient", "GPU_TEST_LESSONS": "01_a,,08_b",
                                         "GPU_TEST_ALLOW_CPU": "1", "GPU_TEST_BUDGET_S": "60",
                                         "GPU_TEST_SOLUTIONS": "/elsewhere"})
    assert (chosen.runner, chosen.lessons, chosen.allow_cpu, chosen.budget_s) == ("nbclient", ["01_a", "08_b"], True,
                                                                                  60)
    assert chosen.solutions == Path("/elsewhere")
    assert settings.Settings.from_env({"GPU_TEST_ALLOW_CPU": "yes"}).allow_cpu is False   # only "1" is a dry run
    for bad in ({"GPU_TEST_RUNNER": "jupyter"}, {"GPU_TEST_RUNNER": "exec"}, {"GPU_TEST_BUDGET_S": "ten minutes"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            settings.Settings.from_env(bad)


def test_a_bad_setting_is_exit_status_2(monkeypatch, capsys):
    monkeypatch.setenv("GPU_TEST_RUNNER", "jupyter")
    assert cli.main([]) == 2
    assert "GPU_TEST_RUNNER must be" in capsys.readouterr().err
    assert cli.main(["--unknown"]) == 2
    assert cli.main(["--help"]) == 0 and "GPU_TEST_ALLOW_CPU" in capsys.readouterr().out


def test_budget_bounds_each_step():
    now = [100.0]
    budget = settings.Budget(570, clock=lambda: now[0])
    assert budget.left() == 570 and budget.timeout() == settings.STEP_TIMEOUT_S
    now[0] += 400
    assert budget.elapsed() == 400 and budget.timeout() == 170
    now[0] += 165
    assert budget.timeout() == 10.0, "a step gets at least 10 s"


def test_lessons_are_found_sorted_and_narrowed(tmp_path):
    for name in ("02_b", "01_a", "notes", "03_no_notebook"):
        (tmp_path / name).mkdir()
    for name in ("02_b", "01_a", "notes"):
        (tmp_path / name / f"{name}.ipynb").write_text("{}")
    assert [n for n, _ in settings.find_lessons(tmp_path, [])] == ["01_a", "02_b"]
    assert settings.find_lessons(tmp_path, ["02_b", "09_z"]) == [("02_b", tmp_path / "02_b" / "02_b.ipynb")]


def test_the_best_available_runner_is_chosen():
    def available(*present):
        return lambda *modules: set(modules) <= set(present)
    assert runners.choose_runner("auto", available("pytest", "nbval", "nbformat", "ipykernel")) == "nbval"
    assert runners.choose_runner("auto", available("nbclient", "nbformat", "ipykernel")) == "nbclient"
    assert runners.choose_runner("nbclient", available("pytest", "nbval", "nbclient", "nbformat", "ipykernel")) \
        == "nbclient"
    assert runners.choose_runner("auto", available("nbformat", "nbclient")) is None, "no kernel: no runner"
    assert runners.choose_runner("nbval", available("nbclient", "nbformat", "ipykernel")) is None


def test_without_a_runner_the_run_fails_and_says_what_to_install(tmp_path, monkeypatch, capsys):
    """A machine where neither nbval nor nbclient imports (here: no Jupyter kernel, no pytest) runs nothing,
    exits 1 and names the packages to install."""
    for name in ("PYTHONPATH", "PYTHONUNBUFFERED"):   # prepare() sets them for the run's processes
        monkeypatch.setenv(name, os.environ.get(name, ""))
    lacking = {"pytest", "nbval", "ipykernel"}
    code = cli.run_all(settings.Settings(allow_cpu=True), tmp_path, settings.Budget(60),
                       available=lambda *modules: not set(modules) & lacking)
    out = capsys.readouterr().out
    assert code == 1, out
    assert "runner   none" in out and "== 00_" not in out and "CUDA assertions ==" not in out, out
    assert "nbval lacks pytest, nbval, ipykernel; nbclient lacks ipykernel" in out, out
    assert "(pip install ipykernel)" in out and ".whl/" in out, out
    assert out.rstrip().splitlines()[-3].split()[-1] == "FAIL", out     # the "(no notebook runner)" row
    assert out.rstrip().splitlines()[-1].split()[-2:] == ["FAIL", "(1)"], out


def test_judging_cells_counts_errors_skips_and_expected_errors():
    error = [{"output_type": "error", "ename": "ValueError", "evalue": "boom"}]
    cells = [({"id": "a"}, []),
             ({"id": "b", "metadata": {"tags": ["raises-exception"]}}, error),
             ({"id": "c"}, None),
             ({"id": "d"}, [{"output_type": "stream", "text": "fine"}] + error)]
    result = report.judge_cells("00_tiny", cells)
    assert [result[k] for k in ("run", "skipped", "passed", "failed", "status")] == [3, 1, 2, 1, "FAIL"]
    assert result["notes"] == ["skipped cell 2 (id c): requires CUDA (not available here)",
                               "cell 3 (id d): ValueError: boom"]
    assert report.judge_cells("00_tiny", cells[:3])["status"] == "ok"


def test_junit_counts(tmp_path):
    xml = tmp_path / "run.xml"
    xml.write_text('<testsuites><testsuite><testcase name="Cell 0"/><testcase name="Cell 1"><failure/></testcase>'
                   '<testcase name="Cell 2"><error/></testcase>'
                   '<testcase name="Cell 3"><skipped message="requires CUDA"/></testcase></testsuite></testsuites>')
    counts = report.junit_counts(xml)
    assert (counts["passed"], counts["failed"], counts["skipped"]) == (1, 2, 1)
    assert counts["notes"] == ["skipped Cell 3: requires CUDA"]
    assert report.junit_counts(tmp_path / "missing.xml")["passed"] == 0


def test_the_result_line_of_the_cuda_assertions_script():
    assert report.result_line_counts("PASSED a\nRESULT passed=3 failed=1 skipped=0\n") == {
        "passed": 3, "failed": 1, "skipped": 0}
    assert report.result_line_counts("Traceback ...\n") == {}


def test_summary_table_total_last_and_exit_status():
    rows = [report.row("01_a", 10, 1, 10, 0), report.row("02_b", status="NOT RUN (time budget)")]
    lines = report.summary(rows, "nbclient", 12.3)
    assert lines[0] == "== GPU test summary: runner nbclient, 12 s ==" and lines[-2].startswith("-")
    assert lines[-1].split() == ["total", "10", "1", "10", "0", "FAIL", "(1)"]
    assert [report.is_bad(r) for r in rows] == [False, True]
    assert report.summary(rows[:1], "nbclient", 1)[-1].split()[-1] == "ok"


def test_an_exhausted_budget_runs_nothing_and_says_so(tmp_path):
    budget = settings.Budget(10)   # under MIN_LEFT_S from the start
    run = settings.Run(tmp_path, budget, cuda=False)
    rows = cli.run_lessons(run, "nbclient", [("01_a", tmp_path / "01_a.ipynb")])
    assert [(r["lesson"], r["status"]) for r in rows] == [("01_a", "NOT RUN (time budget)"),
                                                          (runners.CUDA_ASSERTIONS, "NOT RUN (time budget)")]


def test_nbclient_runner_on_a_relative_notebook_path(tmp_path, monkeypatch):
    """The kernel runs in the notebook's folder (a lesson reads files beside it), also from a relative path."""
    lesson = tmp_path / "solutions" / "00_tiny"
    lesson.mkdir(parents=True)
    (lesson / "beside.txt").write_text("20")
    notebook = tiny_notebook(lesson / "00_tiny.ipynb")
    nb = nbformat.read(notebook, as_version=4)
    nb.cells[0].source = "x = int(open('beside.txt').read())"
    nbformat.write(nb, notebook)
    monkeypatch.chdir(tmp_path)
    run = settings.Run(tmp_path, settings.Budget(120), cuda=False)
    result = runners.run_nbclient(run, "00_tiny", Path("solutions/00_tiny/00_tiny.ipynb"))
    assert [result[k] for k in ("run", "skipped", "passed", "failed", "status")] == [2, 1, 2, 0, "ok"], result
