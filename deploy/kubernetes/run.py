#!/usr/bin/env python3
"""Grade a class on Kubernetes: the Indexed Job of shards, then, once it has ended however it ended, the
finishing Job (Kubernetes has no dependency between Jobs, so this script is it: Slurm's afterany).

    python deploy/kubernetes/run.py [--namespace grading] [--timeout-s 21600]

Applies network-policy.yaml and grading-job.yaml, waits until pte-grade is Complete or Failed, applies
finish-job.yaml, waits for it, prints its log (the students no shard graded, if any) and exits with its exit
code: 0 all graded, 3 some notebook needs attention, 4 some student not graded (run again: each shard grades
its own students again and rewrites only its own files).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def kubectl(namespace: str, *args: str, check: bool = True) -> str:
    done = subprocess.run(["kubectl", "--namespace", namespace, *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.exit(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def ended(job: dict) -> str | None:
    """"Complete" or "Failed" once the Job has one of those conditions, else None."""
    for condition in job.get("status", {}).get("conditions", []):
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


def wait(namespace: str, name: str, timeout_s: float) -> tuple[str, dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = json.loads(kubectl(namespace, "get", "job", name, "-o", "json"))
        state = ended(job)
        if state:
            return state, job
        time.sleep(10)
    sys.exit(f"job {name} did not end within {timeout_s:g} s")


def finish_exit_code(namespace: str) -> int:
    pods = json.loads(kubectl(namespace, "get", "pods", "-l", "job-name=pte-finish", "-o", "json"))["items"]
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses", []):
            terminated = status.get("state", {}).get("terminated")
            if terminated:
                return int(terminated.get("exitCode", 1))
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--timeout-s", type=float, default=6 * 3600, help="per Job")
    args = parser.parse_args(argv)
    kubectl(args.namespace, "apply", "-f", str(HERE / "network-policy.yaml"))
    kubectl(args.namespace, "delete", "job", "pte-finish", "--ignore-not-found")
    kubectl(args.namespace, "apply", "-f", str(HERE / "grading-job.yaml"))
    state, job = wait(args.namespace, "pte-grade", args.timeout_s)
    failed = job.get("status", {}).get("failedIndexes", "")
    print(f"pte-grade: {state}" + (f", failed indexes {failed}" if failed else ""))
    kubectl(args.namespace, "apply", "-f", str(HERE / "finish-job.yaml"))
    wait(args.namespace, "pte-finish", args.timeout_s)
    print(kubectl(args.namespace, "logs", "job/pte-finish", check=False), end="")
    return finish_exit_code(args.namespace)


if __name__ == "__main__":
    sys.exit(main())
