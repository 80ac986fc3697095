#!/usr/bin/env bash
# GPU runner: re-execute every solution notebook with CUDA available, then lesson 08's CUDA
# assertions (tests/test_amp.py, test_cuda_*). Prints the Python/torch/CUDA/GPU it ran with
# first and a summary table (lesson, cells run, skipped, passed, failed) last. Exit status 0
# only when every notebook and every CUDA assertion passed, with CUDA available.
#
#   bash .ci/gpu-test.sh          (make test-gpu; the CI job on [self-hosted, gpu])
#
# What the GPU machine needs. Nothing is installed from the network: it uses the first of
# $PYTHON, .venv/bin/python, python3, python that imports torch (a CUDA build, torch >= 2.4),
# plus numpy and matplotlib, and ipywidgets for the lessons with widgets. Then the best runner
# it finds:
#   nbval     pytest + nbval + ipykernel: like CPU CI, stored outputs are compared (cells tagged
#             nbval-ignore-output, i.e. timings, devices and the CUDA-only cells, run but are not
#             compared) and tests/conftest.py fails the run if a requires-cuda cell did not run;
#   nbclient  nbclient + ipykernel: every cell runs in a Jupyter kernel; it checks that none raises;
#   exec      nothing of Jupyter: every code cell runs in one fresh Python process per notebook
#             (through IPython when importable, plain exec otherwise); it checks that none raises.
# Wheels in .whl/ (pytest, nbval, nbclient, ipykernel and their dependencies) are installed
# offline into a temporary folder first, when some runner module is missing.
#
# Settings (environment variables):
#   PYTHON=...                 the interpreter to use
#   GPU_TEST_RUNNER=nbval|nbclient|exec   force a runner (default: the best available)
#   GPU_TEST_LESSONS=01_x,08_y run a subset of solutions/
#   GPU_TEST_SOLUTIONS=dir     the folder holding <id>/<id>.ipynb (default: solutions)
#   GPU_TEST_ALLOW_CPU=1       dry run without CUDA: CUDA-only cells are skipped and counted
#   GPU_TEST_BUDGET_S=570      wall-clock budget for everything (it fits the CI job's 10 minutes)
set -uo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  local candidate
  for candidate in ${PYTHON:-} .venv/bin/python python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import torch" >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}
if ! PY=$(pick_python); then
  echo "gpu-test: no Python that imports torch (tried \$PYTHON, .venv/bin/python, python3, python)" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 \
   && ! "$PY" -c "import pytest, nbval, nbclient, ipykernel" >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" .whl/*.whl \
    && export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi

export PYTHONPATH="$PWD:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1   # no MPLBACKEND: Jupyter kernels use the inline backend the stored figures came from
if [ "${GPU_TEST_ALLOW_CPU:-0}" != "1" ]; then
  export PTE_EXPECT_CUDA=1
fi

cat > "$work/runner.py" <<'PY'
"""The GPU runner's engine (written out by .ci/gpu-test.sh; see the comments there)."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path.cwd()
WORK = Path(sys.argv[1])
START = time.monotonic()
BUDGET = float(os.environ.get("GPU_TEST_BUDGET_S", "570"))
ALLOW_CPU = os.environ.get("GPU_TEST_ALLOW_CPU") == "1"
CELL_TIMEOUT = 300
REQUIRES_CUDA = "requires-cuda"
RAISES = {"raises-exception", "nbval-raises-exception"}


def have(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)


def left():
    return BUDGET - (time.monotonic() - START)


def tags(cell):
    return set(cell.get("metadata", {}).get("tags") or [])


def source(cell):
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def environment():
    import torch

    cuda = torch.cuda.is_available()
    print("python  ", sys.version.split()[0], sys.executable)
    print("torch   ", torch.__version__, "| CUDA (build)", torch.version.cuda,
          "| cuDNN", torch.backends.cudnn.version() if cuda else None)
    if cuda:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            print(f"GPU {i}   ", props.name, f"| {props.total_memory / 2**30:.0f} GiB",
                  f"| compute capability {props.major}.{props.minor}")
    else:
        print("GPU     ", "none: torch.cuda.is_available() is False")
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if smi.returncode == 0:
            print("driver  ", smi.stdout.strip().replace("\n", ", "))
    except (OSError, subprocess.SubprocessError):
        pass
    return cuda


def lessons():
    folder = Path(os.environ.get("GPU_TEST_SOLUTIONS", "solutions"))
    wanted = [w for w in os.environ.get("GPU_TEST_LESSONS", "").split(",") if w]
    found = sorted(p.name for p in folder.iterdir()
                   if p.is_dir() and p.name[:2].isdigit() and (p / f"{p.name}.ipynb").is_file())
    return [(name, folder / name / f"{name}.ipynb") for name in found if not wanted or name in wanted]


def choose_runner():
    forced = os.environ.get("GPU_TEST_RUNNER", "auto")
    if forced != "auto":
        return forced
    if have("pytest", "nbval", "nbformat", "ipykernel"):
        return "nbval"
    if have("nbclient", "nbformat", "ipykernel"):
        return "nbclient"
    return "exec"


def run_bounded(command, timeout, **kwargs):
    """Run ``command`` in its own process group; on timeout kill the whole group (kernels included).

    Returns the exit code, or ``"timeout"``.
    """
    process = subprocess.Popen(command, start_new_session=True, **kwargs)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return "timeout"


def row(name, run=0, skipped=0, passed=0, failed=0, status="ok", notes=()):
    return {"lesson": name, "run": run, "skipped": skipped, "passed": passed, "failed": failed,
            "status": status, "notes": list(notes)}


# ---------------------------------------------------------------- runners

def junit_counts(path):
    counts = {"passed": 0, "failed": 0, "skipped": 0, "notes": []}
    if not path.is_file():
        return counts
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag == "skipped":
                outcome = "skipped"
                counts["notes"].append(f"skipped {case.get('name')}: {child.get('message', '')}")
            elif child.tag in ("failure", "error"):
                outcome = "failed"
        counts[outcome] += 1
    return counts


def run_pytest(name, args, timeout):
    xml = WORK / f"{name}.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-ra",
               "--junitxml", str(xml), *args]
    code = run_bounded(command, timeout)
    counts = junit_counts(xml)
    status = "ok" if code == 0 else ("TIMEOUT" if code == "timeout" else f"FAIL (pytest exit {code})")
    return row(name, counts["passed"] + counts["failed"], counts["skipped"], counts["passed"], counts["failed"],
               status, counts["notes"])


def run_nbval(name, path):
    return run_pytest(name, ["-p", "conftest", "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
                             "tests/nbval_sanitize.cfg", "--nbval-cell-timeout", str(CELL_TIMEOUT), str(path)],
                      timeout=max(10.0, min(left(), 300)))


def judge_cells(name, cells):
    """cells: [(cell, outputs or None when skipped)] -> a table row."""
    result = row(name)
    for index, (cell, outputs) in enumerate(cells):
        if outputs is None:
            result["skipped"] += 1
            result["notes"].append(f"skipped cell {index} (id {cell.get('id')}): requires CUDA (not available here)")
            continue
        result["run"] += 1
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors and not (tags(cell) & RAISES):
            result["failed"] += 1
            result["notes"].append(f"cell {index} (id {cell.get('id')}): {errors[0].get('ename')}: "
                                   f"{str(errors[0].get('evalue'))[:300]}")
        else:
            result["passed"] += 1
    if result["failed"]:
        result["status"] = "FAIL"
    return result


def run_nbclient(name, path, cuda):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    skip = set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and REQUIRES_CUDA in tags(cell) and not cuda:
            skip.add(index)
            cell.source = "pass  # requires CUDA: skipped on this machine"
    client = NotebookClient(nb, timeout=int(max(10, min(CELL_TIMEOUT, left()))), kernel_name="python3",
                            allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except Exception as exc:  # a dead kernel or a timeout: report it, keep the other lessons going
        return row(name, status="FAIL", notes=[f"{type(exc).__name__}: {exc}"[:400]])
    cells = [(cell, None if i in skip else cell.get("outputs", []))
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    return judge_cells(name, cells)


def run_exec(name, path, cuda):
    out = WORK / f"{name}.json"
    command = [sys.executable, __file__, str(WORK), "--exec-one", str(path), str(out), "1" if cuda else "0"]
    if run_bounded(command, max(10.0, min(left(), 300)), cwd=path.parent,
                   env=dict(os.environ, MPLBACKEND="Agg")) == "timeout":
        return row(name, status="TIMEOUT")
    if not out.is_file():
        return row(name, status="FAIL", notes=["the notebook's process died before reporting"])
    return json.loads(out.read_text())


def exec_one(path, out, cuda):
    """Run every code cell of one notebook in this process (fresh for each notebook)."""
    nb = json.loads(Path(path).read_text())
    os.chdir(Path(path).parent)
    shell = None
    try:
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
    except ImportError:
        namespace = {"__name__": "__main__", "display": print}
    cells = []
    for index, cell in enumerate(c for c in nb["cells"] if c.get("cell_type") == "code"):
        if REQUIRES_CUDA in tags(cell) and not cuda:
            cells.append((cell, None))
            continue
        error = None
        if shell is not None:
            result = shell.run_cell(source(cell), store_history=True)
            failure = result.error_before_exec or result.error_in_exec
            if failure is not None:
                error = failure
        else:
            try:
                exec(compile(source(cell), f"<cell {index}>", "exec"), namespace)
            except BaseException as exc:  # the cell's error is what we report
                error = exc
        outputs = [] if error is None else [{"output_type": "error", "ename": type(error).__name__,
                                             "evalue": str(error)}]
        cells.append((cell, outputs))
    result = judge_cells(Path(path).stem, cells)
    Path(out).write_text(json.dumps(result))


def run_cuda_assertions(cuda):
    name = "08 CUDA assertions (tests/test_amp.py)"
    if not Path("tests/test_amp.py").is_file():
        return None
    if have("pytest"):
        result = run_pytest("cuda-assertions", ["--noconftest", "tests/test_amp.py", "-k", "test_cuda_"],
                            timeout=max(10.0, min(left(), 300)))
        result["lesson"] = name
        return result
    try:
        done = subprocess.run([sys.executable, "tests/test_amp.py"], capture_output=True, text=True,
                              timeout=max(10.0, min(left(), 300)))
    except subprocess.TimeoutExpired:
        return row(name, status="TIMEOUT")
    print(done.stdout, done.stderr, sep="")
    counts = dict(part.split("=") for line in done.stdout.splitlines() if line.startswith("RESULT ")
                  for part in line.split()[1:])
    passed, failed, skipped = (int(counts.get(k, 0)) for k in ("passed", "failed", "skipped"))
    status = "ok" if done.returncode == 0 and counts else f"FAIL (exit {done.returncode})"
    return row(name, passed + failed, skipped, passed, failed, status)


# ---------------------------------------------------------------- main

def main():
    print("== GPU test: environment ==")
    cuda = environment()
    runner = choose_runner()
    print("runner  ", runner, "| budget", f"{BUDGET:.0f} s", "| CUDA-only cells",
          "run" if cuda else "skipped (GPU_TEST_ALLOW_CPU=1)" if ALLOW_CPU else "-")
    rows = []
    if not cuda and not ALLOW_CPU:
        print("\ngpu-test: CUDA is not available, so nothing that needs it can be checked. This script is for "
              "a CUDA machine (set GPU_TEST_ALLOW_CPU=1 for a dry run without one).")
        rows.append(row("(no CUDA)", status="FAIL", notes=["torch.cuda.is_available() is False"]))
    else:
        for name, path in lessons():
            if left() < 15:
                rows.append(row(name, status="NOT RUN (time budget)"))
                continue
            print(f"\n== {name} ({runner}) ==", flush=True)
            began = time.monotonic()
            if runner == "nbval":
                result = run_nbval(name, path)
            elif runner == "nbclient":
                result = run_nbclient(name, path, cuda)
            else:
                result = run_exec(name, path, cuda)
            result["seconds"] = time.monotonic() - began
            for note in result["notes"]:
                print("  ", note)
            rows.append(result)
        if left() >= 15:
            print("\n== lesson 08: CUDA assertions ==", flush=True)
            result = run_cuda_assertions(cuda)
            if result is not None:
                rows.append(result)
        else:
            rows.append(row("08 CUDA assertions (tests/test_amp.py)", status="NOT RUN (time budget)"))
    total = row("total", *(sum(r[k] for r in rows) for k in ("run", "skipped", "passed", "failed")))
    bad = [r for r in rows if r["status"] != "ok" or r["failed"]]
    total["status"] = "ok" if not bad else f"FAIL ({len(bad)})"
    print(f"\n== GPU test summary: runner {runner}, {time.monotonic() - START:.0f} s ==")
    header = f"{'lesson':40} {'cells run':>9} {'skipped':>7} {'passed':>6} {'failed':>6}  status"
    print(header)
    print("-" * len(header))
    for r in rows + [total]:
        if r is total:
            print("-" * len(header))
        print(f"{r['lesson']:40} {r['run']:>9} {r['skipped']:>7} {r['passed']:>6} {r['failed']:>6}  {r['status']}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "--exec-one":
        exec_one(sys.argv[3], sys.argv[4], sys.argv[5] == "1")
    else:
        sys.exit(main())
PY

"$PY" "$work/runner.py" "$work"
