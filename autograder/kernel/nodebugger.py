"""The kernel class of the grading command and of the ``pte-warm`` kernelspec: IPython's kernel without the
debugger, cold or warm alike.

Each ipykernel kernel imports debugpy as it starts, to serve JupyterLab's debugger panel, which a graded
notebook never uses (the import alone took 0.28 s here; a warm grading kernel without it answers in
0.14-0.17 s instead of 0.20-0.26 s). The grader names this class on
every kernel it starts (``--IPKernelApp.kernel_class``), and so does the ``pte-warm`` kernelspec
(autograder/warm/kernelspec: nbval's, the pitfall kernels' and plain nbgrader's in ``make test``; 0.2 CPU-s less a
kernel). ipykernel imports it before it makes the kernel,
and this module marks debugpy as missing first, so the kernel finds no debugger, as on a machine without
debugpy. A cold and a warm grading kernel start the same way: a template never imports debugpy
(autograder/warm/template.py).
"""
import sys

sys.modules.setdefault("debugpy", None)   # `import debugpy` raises ImportError: ipykernel's own test for it

from ipykernel.ipkernel import IPythonKernel as Kernel  # noqa: E402  (after the line above, on purpose)

__all__ = ["Kernel"]
