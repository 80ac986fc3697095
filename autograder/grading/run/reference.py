"""The reference observations a grading run judges with, computed on the grading host.

``make release`` stores what the solution's hidden checks observed
(``solutions/<id>/reference_observations.json``), but that file was made on the release
machine. Another CPU's vector code rounds differently, so a quantity that is sensitive to
rounding can differ there, and a correct answer would lose points for it. The grading
command therefore runs the instructor's solution once per assignment, in the same sandbox,
with the same limits, threads and environment as the students' kernels, and judges the
students' observations against *that*. Student code and reference then meet on the same
CPU and the same torch.

The run is cached under ``.grading/reference-cache/``, keyed by everything that decides its
numbers: the solution notebooks, the kernel-side package and the data, the torch version,
the instruction sets the CPU offers torch's dispatch, the CPU-dispatch settings, the thread count and the
interpreter. The stored file stays the release's record: every observation where the host
disagrees with it is listed in the run's report. A check that is sensitive to the platform
is a course bug for the instructor to fix, never a silent loss of points.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.grading.isolate import sandbox
from autograder.grading.judging import judge
from autograder.grading.plan.settings import Limits
from autograder.grading.run import runner
from autograder.grading.status import Status
from autograder.kernel import paths
from autograder.kernel.vocabulary import observations, protocol

CACHE_DIR = "reference-cache"


@dataclass
class HostReference:
    """What one assignment is judged with, and how it compares with the stored record."""
    assignment: str
    cells: dict[str, list[dict]]
    source: str                      # "host" (computed or cached here) or "stored" (the fallback)
    cached: bool = False
    key: str = ""
    differences: list[dict] = field(default_factory=list)
    problem: str = ""                # why the host reference could not be used, if it was not

    def summary(self) -> dict:
        return {"source": self.source, "cached": self.cached, "key": self.key, "differences": self.differences,
                "problem": self.problem}


def _digest_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.name).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _cpu_identity() -> dict[str, str]:
    """The installed torch and what its CPU dispatch chooses from, without importing torch (1.4 s in a
    grading worker): the version, and the instruction sets the CPU reports (Linux's /proc/cpuinfo; elsewhere
    torch's own answer). With the dispatch settings, they decide which vector code torch runs."""
    from importlib import metadata

    identity = {"torch": metadata.version("torch")}
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith(("flags", "Features")))
        identity["cpu_flags"] = hashlib.sha256(" ".join(sorted(flags.split(":", 1)[1].split())).encode()).hexdigest()
    except (OSError, StopIteration):
        import torch

        identity["capability"] = torch.backends.cpu.get_cpu_capability()
    return identity


def cache_key(solution_files: list[Path], threads: int) -> str:
    """A digest of everything that decides the reference's numbers on this host."""
    package = paths.PACKAGE_ROOT / "autograder"
    kernel_files = [package / "__init__.py", *sorted((package / "kernel").rglob("*.py"))]
    data_files = [p for p in Path(paths.data_dir()).rglob("*") if p.is_file()]
    parts = {
        "solution": _digest_files(solution_files),
        "kernel": _digest_files(kernel_files),
        "data": _digest_files(data_files),
        **_cpu_identity(),
        "dispatch": sandbox.cpu_dispatch_env(),
        "threads": threads,
        "machine": platform.machine(),
        "python": sys.version,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _entries(observed: list) -> list[dict]:
    try:
        entries = protocol.Reference.entries(observed)
    except ValueError as error:   # a MessageError: it says what is wrong (another format, a field)
        raise ValueError(f"the solution published a malformed observation: {error}") from None
    for entry in entries:
        observations.to_json({"value": entry["value"]})   # its size cap, and plain JSON only
    return entries


def run_solution(notebooks: list[Path], limits: Limits, scratch_root: Path) -> dict[str, list[dict]]:
    """Execute the solution notebooks in the sandbox, as a student's; grade id -> its observations."""
    cells: dict[str, list[dict]] = {}
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        scratch = Path(tempfile.mkdtemp(prefix="reference-", dir=scratch_root))
        try:
            run = runner.execute(nb, limits, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if run.status != Status.GRADED:
            raise RuntimeError(f"{path.name}: the solution ended '{run.status}' in the sandbox: {run.reason}")
        for index in sorted(run.test_cells):
            grade_id = protocol.nbgrader_meta(run.nb.cells[index])["grade_id"]
            outputs = run.test_outputs(index)   # the visible part's, then the hidden part's
            errors = [o for o in outputs if o.get("output_type") == "error"]
            if errors:
                raise RuntimeError(f"{path.name}: the solution's test cell '{grade_id}' raised "
                                   f"{errors[0].get('ename')}: {errors[0].get('evalue', '')}"[:300])
            cells[grade_id] = _entries(protocol.observations_in(outputs))
    return cells


def differences(stored: dict[str, list[dict]], host: dict[str, list[dict]]) -> list[dict]:
    """Every observation where the host's reference and the stored one disagree (labels as the stored file has)."""
    found = []
    for test in sorted(set(stored) | set(host)):
        mine, theirs = host.get(test), stored.get(test)
        if mine is None or theirs is None:
            found.append({"test": test, "index": None, "label": None,
                          "problem": "only in the stored reference" if mine is None else "only on this host"})
            continue
        if len(mine) != len(theirs):
            found.append({"test": test, "index": None, "label": None,
                          "problem": f"{len(mine)} observations on this host, {len(theirs)} stored"})
        for index, (entry, record) in enumerate(zip(mine, theirs)):
            try:
                problem = observations.compare(record, entry["value"])
            except Exception as exc:  # a malformed stored entry is a difference too
                problem = ("malformed", f"{type(exc).__name__}: {exc}")
            if problem:
                found.append({"test": test, "index": index + 1, "label": record.get("label"), "problem": problem[1]})
    return found


def load_stored(source_dir: Path, assignment: str) -> dict[str, list[dict]] | None:
    try:
        return judge.load_reference(source_dir, assignment)
    except judge.ReferenceMissing:
        return None


def _cache_entry(folder: Path, assignment: str, notebooks: list[str], limits: Limits,
                 cache_root: Path) -> tuple[list[Path], str, Path]:
    """The solution notebooks, the cache key of their run on this host and the cache file it would be in."""
    files = [folder / f"{name}.ipynb" for name in notebooks]
    if not all(path.is_file() for path in files):
        raise FileNotFoundError(f"the solution notebooks {', '.join(p.name for p in files)} are not all in {folder}")
    key = cache_key(files, limits.threads)
    return files, key, Path(cache_root) / CACHE_DIR / f"{assignment}-{key}.json"


def _judged_with(source_dir: Path, assignment: str, cells: dict, cached: bool, key: str,
                 stored: dict | None) -> HostReference:
    found = differences(stored, cells) if stored is not None else []
    result = HostReference(assignment, cells, "host", cached=cached, key=key, differences=found)
    if stored is None:
        record = Path(source_dir) / assignment / protocol.REFERENCE_FILE
        result.problem = f"{record} is missing: run `make release` to record it"
    return result


def cached_reference(source_dir: Path, assignment: str, notebooks: list[str], limits: Limits,
                     cache_root: Path) -> HostReference | None:
    """The host reference :func:`host_reference` would return from its cache, without running anything (the
    grading command reads it before it starts a grading process for it); None when the cache holds no entry for
    what decides the numbers now (the solution, the kernel package, the data, torch, the CPU, the threads), or
    one it cannot read."""
    try:
        _, key, cached_file = _cache_entry(Path(source_dir) / assignment, assignment, notebooks, limits, cache_root)
        if not cached_file.is_file():
            return None
        cells = protocol.Reference.read(cached_file).cells
    except Exception:  # the run in a grading process says what is wrong, and falls back to the stored record
        return None
    return _judged_with(source_dir, assignment, cells, True, key, load_stored(source_dir, assignment))


def host_reference(source_dir: Path, assignment: str, notebooks: list[str], limits: Limits,
                   scratch_root: Path, cache_root: Path) -> HostReference:
    """The reference one assignment is judged with on this host (cached), compared with the stored one.

    Never raises: if the solution cannot run here, the stored reference is used and ``problem`` says why;
    with neither, ``cells`` is empty and every test cell of the assignment fails with a grader error."""
    stored = load_stored(source_dir, assignment)
    try:
        files, key, cached_file = _cache_entry(Path(source_dir) / assignment, assignment, notebooks, limits,
                                               cache_root)
        cached = cached_file.is_file()
        if cached:
            cells = protocol.Reference.read(cached_file).cells
        else:
            cells = run_solution(files, limits, Path(scratch_root))
            cached_file.parent.mkdir(parents=True, exist_ok=True)
            # a temporary name of its own: shards on other nodes may write the same entry at the same time
            protocol.Reference(assignment, cells).write(cached_file, key=key,
                                                        writer=f"{platform.node()}-{os.getpid()}")
    except Exception as exc:  # the course or the host is at fault; the stored record still grades
        problem = f"the solution could not be run on this host ({type(exc).__name__}: {exc})"[:400]
        return HostReference(assignment, stored or {}, "stored", problem=problem)
    return _judged_with(source_dir, assignment, cells, cached, key, stored)
