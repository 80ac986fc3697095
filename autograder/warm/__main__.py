"""``python -m autograder.warm install``: install the ``pte-warm`` kernelspec into this venv.
``python -m autograder.warm bytecode``: compile what a lesson's kernel imports (``autograder.warm.bytecode``)."""
import argparse
import sys
from pathlib import Path

from autograder.warm import KERNEL_NAME

SPEC_DIR = Path(__file__).with_name("kernelspec")


def install() -> str:
    """Install (or refresh) the kernelspec under ``sys.prefix/share/jupyter/kernels``; return its folder.

    Its argv starts with ``python``: jupyter_client runs that as the launcher's ``sys.executable``.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().install_kernel_spec(str(SPEC_DIR), kernel_name=KERNEL_NAME, prefix=sys.prefix)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m autograder.warm", description=__doc__)
    parser.add_argument("command", choices=["install", "bytecode"])
    args = parser.parse_args(argv)
    if args.command == "bytecode":
        from autograder.warm.bytecode import compile_kernel_imports

        compile_kernel_imports()
    else:
        print(install())


if __name__ == "__main__":
    main()
