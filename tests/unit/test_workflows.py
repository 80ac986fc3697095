"""The CI workflow is valid and runs what exists: `make test` on a CPU runner, the GPU script on a GPU runner."""
from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from autograder import course

REPO = course.REPO_ROOT
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
GPU_SCRIPT = REPO / ".ci" / "gpu-test.sh"


@pytest.fixture(scope="module")
def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict), "ci.yml must be a YAML mapping"
    return data


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def run_lines(job: dict) -> list[str]:
    return [line.strip() for step in job["steps"] if "run" in step for line in str(step["run"]).splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_workflow_has_the_required_keys(workflow):
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1); GitHub reads it as "on".
    triggers = workflow.get("on", workflow.get(True))
    assert workflow.get("name") and triggers, "a workflow needs a name and triggers (on:)"
    assert {"push", "pull_request"} <= set(triggers), "CI should run on pushes and pull requests"
    assert {"cpu", "gpu"} <= set(workflow["jobs"])
    for name, job in workflow["jobs"].items():
        assert job.get("runs-on"), f"job {name} has no runs-on"
        assert isinstance(job.get("timeout-minutes"), int), f"job {name} should bound its time"
        assert isinstance(job.get("steps"), list) and job["steps"], f"job {name} has no steps"
        for step in job["steps"]:
            assert isinstance(step, dict) and (("uses" in step) != ("run" in step)), \
                f"job {name}: each step has exactly one of uses/run: {step}"
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), f"pin actions to a major version: {step}"


def test_cpu_job_runs_make_test_on_python_311(workflow):
    job = workflow["jobs"]["cpu"]
    assert job["runs-on"] == "ubuntu-latest"
    setup = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python@")]
    assert setup and setup[0]["with"]["python-version"] == "3.11", \
        "python-version must be the string '3.11' (unquoted, YAML reads 3.10 as 3.1)"
    assert any(re.match(r"make test(\s|$)", line) for line in run_lines(job)), "the CPU job must run `make test`"


def test_gpu_job_runs_the_gpu_script_on_a_self_hosted_gpu_runner(workflow):
    job = workflow["jobs"]["gpu"]
    assert set(job["runs-on"]) >= {"self-hosted", "gpu"}
    assert any(".ci/gpu-test.sh" in line for line in run_lines(job)), "the GPU job must run .ci/gpu-test.sh"
    assert job["timeout-minutes"] * 60 > 570, "the job must leave the script its 570 s budget"


def test_jobs_only_reference_make_targets_and_scripts_that_exist(workflow):
    targets = make_targets()
    assert "test" in targets
    for name, job in workflow["jobs"].items():
        for line in run_lines(job):
            for target in re.findall(r"\bmake\s+([A-Za-z][\w.-]*)", line):
                assert target in targets, f"job {name} runs `make {target}`, which the Makefile does not define"
            for script in re.findall(r"(?:^|\s)(\.?\.?/?[\w./-]+\.(?:sh|py))\b", line):
                assert (REPO / script).is_file(), f"job {name} runs {script}, which does not exist"


def test_gpu_script_replaces_the_old_check_and_parses():
    assert not (REPO / ".ci" / "gpu-check.sh").exists(), ".ci/gpu-test.sh replaces .ci/gpu-check.sh"
    assert GPU_SCRIPT.is_file() and os.access(GPU_SCRIPT, os.X_OK)
    subprocess.run(["bash", "-n", str(GPU_SCRIPT)], check=True)
    assert "autograder.gpu_runner" in GPU_SCRIPT.read_text(), "the shell entry runs the Python module"
    package = REPO / "autograder" / "gpu_runner"   # what the GPU job really does
    runner = "\n".join(path.read_text() for path in sorted(package.glob("*.py")))
    for needed in ("test_cuda_", "PTE_EXPECT_CUDA", "nbval-ignore-output", "summary"):
        assert needed in runner, f"autograder/gpu_runner/ no longer mentions {needed}"
    if "test-gpu" in make_targets():
        recipe = (REPO / "Makefile").read_text().split("\ntest-gpu:", 1)[1].split("\n\n", 1)[0]
        assert ".ci/gpu-test.sh" in recipe, "`make test-gpu` should run .ci/gpu-test.sh"
