"""The cluster recipes (deploy/): the Kubernetes manifests carry what the shard mapping relies on, the Slurm
scripts ask for what the README says, and the seccomp profile adds exactly bubblewrap's calls.

No cluster here: the manifests are read with PyYAML and checked field by field (tests/e2e/test_slurm.py runs
the Slurm recipe for real).
"""
from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml

from autograder import course

DEPLOY = course.REPO_ROOT / "deploy"
K8S = DEPLOY / "kubernetes"


def load(name: str) -> dict:
    return yaml.safe_load((K8S / name).read_text())


def pod_of(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def container(job: dict, name: str) -> dict:
    return next(c for c in pod_of(job)["containers"] if c["name"] == name)


def option(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_grading_job_is_indexed_one_pod_a_shard():
    job = load("grading-job.yaml")
    spec = job["spec"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert spec["completionMode"] == "Indexed"
    assert 1 <= spec["parallelism"] <= spec["completions"]
    assert spec["backoffLimitPerIndex"] >= 1 and "backoffLimit" not in spec
    assert pod_of(job)["restartPolicy"] == "Never"   # backoffLimitPerIndex requires it
    args = container(job, "grade")["args"]
    assert args[0] == "grade" and option(args, "--shard") == "auto"
    assert int(option(args, "--shard-count")) == spec["completions"], "--shard-count must equal completions"
    assert option(args, "--course") == "/course"


def test_exit_3_is_a_finished_shard_and_2_fails_the_job():
    job = load("grading-job.yaml")
    command = container(job, "grade")["command"]
    assert command[:2] == ["/bin/sh", "-c"] and '[ "$code" = 3 ] && exit 0' in command[2]
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "FailJob", "onExitCodes": {"containerName": "grade", "operator": "In", "values": [2]}} in rules


@pytest.mark.parametrize("name,container_name", [("grading-job.yaml", "grade"), ("finish-job.yaml", "finish")])
def test_pods_requests_equal_limits_and_no_privilege(name, container_name):
    job = load(name)
    pod, box = pod_of(job), container(job, container_name)
    assert box["resources"]["requests"] == box["resources"]["limits"]
    assert {"cpu", "memory"} <= set(box["resources"]["limits"])
    security = box["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and "add" not in security["capabilities"]
    assert security["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    assert job["metadata"]["labels"]["app.kubernetes.io/name"] == "pte-grader"
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "pte-grader"   # the policy's
    mounts = {m["name"]: m["mountPath"] for m in box["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["course"] == "/course"
    assert volumes["course"]["persistentVolumeClaim"]["claimName"] == load("course-volume.yaml")["metadata"]["name"]
    assert set(mounts) <= set(volumes)
    env = {e["name"]: e for e in box.get("env", [])}
    assert "secretKeyRef" in env["PGPASSWORD"]["valueFrom"]   # the gradebook's password from a Secret


def test_grading_pods_run_the_bwrap_profiles_and_the_rest_the_default():
    grading = pod_of(load("grading-job.yaml"))["securityContext"]
    assert grading["seccompProfile"] == {"type": "Localhost", "localhostProfile": "profiles/pte-bwrap.json"}
    assert grading["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "pte-bwrap"}
    assert pod_of(load("finish-job.yaml"))["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    apparmor = (K8S / "apparmor" / "pte-bwrap").read_text()
    assert re.search(r"^profile pte-bwrap ", apparmor, re.M) and re.search(r"^\s*userns,", apparmor, re.M)


def test_finish_job_uses_the_same_course_and_count():
    grading, finish = load("grading-job.yaml"), load("finish-job.yaml")
    args = container(finish, "finish")["args"]
    assert args[0] == "finish" and option(args, "--course") == "/course"
    assert int(option(args, "--shard-count")) == grading["spec"]["completions"]
    assert container(finish, "finish")["image"] == container(grading, "grade")["image"]


def test_network_policy_denies_egress_but_the_gradebook_and_dns():
    policy = load("network-policy.yaml")
    assert policy["kind"] == "NetworkPolicy"
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "pte-grader"}
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["spec"]["ingress"] == []
    ports = sorted(p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"])
    assert ports == [53, 53, 5432]
    assert all(rule.get("to") for rule in policy["spec"]["egress"]), "no rule may open egress to everywhere"


def test_seccomp_profile_adds_only_bubblewraps_calls():
    spec = importlib.util.spec_from_file_location("seccomp_profile", K8S / "seccomp_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["unshare", "setns"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}}]}
    profile = module.with_bwrap(base)
    assert profile["syscalls"][:2] == base["syscalls"] and len(base["syscalls"]) == 2   # base unchanged
    added = profile["syscalls"][2]
    assert sorted(added["names"]) == ["clone", "mount", "pivot_root", "umount2", "unshare"]
    assert added["action"] == "SCMP_ACT_ALLOW" and not added["args"] and "includes" not in added
    assert module.with_bwrap(profile) == profile   # written twice, the rule is there once
    with pytest.raises(ValueError):
        module.with_bwrap({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []})
    json.dumps(profile)


def test_slurm_scripts():
    array = (DEPLOY / "slurm" / "grade-array.sbatch").read_text()
    finish = (DEPLOY / "slurm" / "finish.sbatch").read_text()
    assert "--shard auto" in array and '--jobs "${SLURM_CPUS_PER_TASK' in array and "#SBATCH --requeue" in array
    assert "#SBATCH --output" not in array   # submit.py names each task's output after its index (%A_%a)
    assert "autograder finish" in finish and "--shard-count" in finish
    spec = importlib.util.spec_from_file_location("submit", DEPLOY / "slurm" / "submit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.array_spec(8, 4) == "0-7%4" and module.array_spec(1, None) == "0-0"


def test_containerfile_uses_debian_and_pypi_only():
    text = (DEPLOY / "Containerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms and all(image.startswith("docker.io/library/debian:") for image in froms)
    assert "apt-get install" in text and "pip install --no-cache-dir -r requirements.txt" in text
    assert "bubblewrap" in text and re.search(r"^USER 1000$", text, re.M)
    assert "--index-url" not in text and "curl" not in text and "wget" not in text
