"""The grading start fails closed: a grading kernel runs inside its sandbox or does not run.

A warm grading kernel is asked for by kernelspec name (``pte-warm``), and jupyter_client finds that name on the
Jupyter path: a folder on ``JUPYTER_PATH`` comes before the venv's own kernelspecs. A ``pte-warm`` kernelspec
found there that names jupyter_client's stock ``local-provisioner`` would start the kernel's command as it is,
as root, on the host: the warm kernel's command has no sandbox prefix, its sandbox being made by the forking
provisioner's child. Here such a kernelspec is put first on the path, and a submission that asks who it is and
writes a file in this test's folder (on the host) is graded through ``runner.execute``, the grading command's
own path: it must be graded cold inside bubblewrap (uid 65534, PID 2 of its own namespace, the host's folder not
there), with a note that names the impostor, and never as root.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from autograder.grading.isolate import sandbox
from autograder.grading.plan.settings import Limits
from autograder.grading.run import runner
from autograder.grading.run.kernel_client import SandboxedKernelManager
from autograder.grading.status import Status
from autograder.warm import KERNEL_NAME, isolate
from autograder.warm.__main__ import SPEC_DIR
from autograder.warm.provisioner import ColdStartRefused

pytestmark = pytest.mark.skipif(isolate.available() is not None or not sandbox.sandbox_available(),
                                reason=f"warm sandboxed kernels need root and bubblewrap here: {isolate.available()}")


@pytest.fixture
def impostor(tmp_path, monkeypatch) -> Path:
    """A ``pte-warm`` kernelspec naming the stock provisioner, first on the Jupyter path; its folder."""
    spec = json.loads((SPEC_DIR / "kernel.json").read_text())
    spec["metadata"]["kernel_provisioner"] = {"provisioner_name": "local-provisioner"}
    folder = tmp_path / "jupyter" / "kernels" / KERNEL_NAME
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    assert Path(KernelSpecManager().find_kernel_specs()[KERNEL_NAME]) == folder   # it is the one found
    return folder


def test_a_pte_warm_kernelspec_with_the_stock_provisioner_never_runs_unsandboxed(impostor, tmp_path):
    escape = tmp_path / "escaped"
    cells = ["import os\nprint('who=' + repr([os.getuid(), os.getpid()]))",
             f"try:\n    open({str(escape)!r}, 'w').write('root on the host')\n    print('wrote=yes')\n"
             "except OSError as error:\n    print('wrote=' + type(error).__name__)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = runner.execute(nb, Limits(timeout_s=120, cell_timeout_s=60, memory_mb=768, output_mb=2, threads=1,
                                    sandbox=True, processes=128, disk_mb=64, warm=True), scratch)
    said = {line.split("=", 1)[0]: line.split("=", 1)[1] for cell in run.nb.cells for out in cell.outputs
            if out.get("output_type") == "stream" for line in out["text"].splitlines() if "=" in line}
    assert not escape.exists(), f"the kernel wrote on the host: {said}, {run.kernel_start}, {run.notes}"
    assert run.status == Status.GRADED and run.kernel_start == "cold", (run.status, run.reason, run.notes, said)
    assert eval(said["who"]) == [65534, 2], said   # bubblewrap's PID 1 is its own init; the kernel is 2
    assert said["wrote"] != "yes", said
    assert any("cold kernel" in note and "local-provisioner" in note for note in run.notes), run.notes


def test_the_manager_refuses_before_launching_anything(impostor, tmp_path):
    """The check itself, without a grading run: a kernel manager asked for a sandboxed kernel under a kernelspec
    whose provisioner is not the forking one raises ColdStartRefused, and no process was started."""
    km = SandboxedKernelManager(kernel_name=KERNEL_NAME, transport="ipc", ip=str(tmp_path / "kernel"))
    km.connection_file = str(tmp_path / "kernel.json")
    km.sandboxed = True
    spec = {"mpl_cache": "", "work": str(tmp_path)}   # never read: nothing is launched
    with pytest.raises(ColdStartRefused, match="local-provisioner"):
        asyncio.run(km.start_kernel(pte_sandbox=spec))
    assert km.provisioner is not None and not km.provisioner.has_process
