"""``python -m autograder.warm bytecode``: compile, once and as the venv's owner, what every lesson's kernel imports.

``make venv`` installs the requirements without compiling them (pip's compile of all 12,000 modules took 31 s of the
50 s install, and most of them, sympy's, scipy's and torch's own tests among them, are never imported). Python
writes a module's bytecode the first time a process that may write beside it imports it, so the instructor's side
(the grading command, nbgrader, JupyterLab, pytest) compiles what it uses once. A sandboxed kernel may not write
there: without this step each of them would compile torch's import afresh (2.2 s more per cold kernel). So this
starts one kernel as the venv's owner and has it import what a lesson's kernel imports, the way it does: the warm
template's preload, ipykernel's start (the debugger), an optimiser step (it imports ``torch._dynamo``), figures
drawn by the inline backend, a widget, a DataLoader, a traceback, a long output, every module of
``autograder.kernel``. After it, a run of every solution in a kernel that may not write bytecode found none missing.
"""
from __future__ import annotations

CODE = """
import importlib, io, pkgutil
import autograder.kernel
from autograder.warm import template
template.preload()
for found in pkgutil.walk_packages(autograder.kernel.__path__, "autograder.kernel."):
    importlib.import_module(found.name)
import torch, ipywidgets, matplotlib.pyplot as plt
from torch.utils.data import DataLoader, TensorDataset
from IPython.display import display
model = torch.nn.Linear(2, 1)
for make in (torch.optim.SGD, torch.optim.Adam):
    step = make(model.parameters(), lr=0.1)
    model(torch.ones(4, 2)).sum().backward()
    step.step()
list(DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=2))
display(ipywidgets.IntSlider())
plt.plot([0, 1]); plt.show()
plt.contourf([[0, 1], [1, 0]]); plt.show()
torch.save(model.state_dict(), io.BytesIO())
ip = get_ipython()
for mode in ("Minimal", "Context"):
    ip.run_line_magic("xmode", mode)
try:
    torch.ones(2) @ torch.ones(3)
except RuntimeError:
    ip.showtraceback()
print("x" * 200_000)
# imported on paths a lesson takes and the lines above do not (seen missing after a run of every lesson)
importlib.import_module("torch._subclasses.schema_check_mode")
"""


def compile_kernel_imports(timeout_s: float = 300.0) -> None:
    """Start a kernel of this venv (bytecode written: the caller's ``PYTHONDONTWRITEBYTECODE`` is dropped) and run
    :data:`CODE` in it; an error in it is raised here."""
    import os

    from jupyter_client.manager import start_new_kernel

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    manager, client = start_new_kernel(kernel_name="python3", env=env, startup_timeout=timeout_s)
    try:
        reply = client.execute_interactive(CODE, timeout=timeout_s, output_hook=lambda msg: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the kernel's imports failed: {reply['content'].get('ename')}: "
                               f"{reply['content'].get('evalue')}")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)

