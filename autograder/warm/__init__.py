"""Warm kernels: a jupyter_client provisioner (``pte-forking``) that forks each kernel from a template that
has already imported torch, matplotlib and ipykernel, and the ``pte-warm`` kernelspec that uses it.

``python -m autograder.warm install`` installs the kernelspec into this venv. See ``provisioner`` (when a
kernel starts warm or cold, how templates are keyed) and ``template`` (what a forked kernel shares with the
template and what it gets fresh).
"""

KERNEL_NAME = "pte-warm"   # the kernelspec's name (kernelspec/kernel.json, installed by ``install``)
