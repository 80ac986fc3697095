"""Seconds from "kernel wanted" to "first cell ran", cold (``python3``) against warm (``pte-warm``).

    python -m bench.bench_warm [--cold 2] [--warm 5]

The clock starts as ``KernelManager.start_kernel`` is called and stops at the ``execute_reply`` of a first
cell ``import torch, matplotlib.pyplot``. Two ways to send that cell: at once (zmq queues it until the kernel
listens: the kernel's own cost) and after ``wait_for_ready`` (what nbclient does: it adds the client's
0.2 s wait for a quiet IOPub channel). The warm template is started and waited for first, its start-up printed
once. Figures taken while other processes keep the cores busy mean little: the load average is printed.
Nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from jupyter_client import KernelManager

from autograder.warm import KERNEL_NAME, pool
from autograder.warm.__main__ import install

FIRST_CELL = "import torch, matplotlib.pyplot"


def first_cell_seconds(kernel_name: str, wait_ready: bool) -> float:
    km = KernelManager(kernel_name=kernel_name)
    started = time.perf_counter()
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        if wait_ready:
            kc.wait_for_ready(timeout=300)
        msg_id = kc.execute(FIRST_CELL)
        while True:
            reply = kc.get_shell_msg(timeout=300)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        seconds = time.perf_counter() - started
        if reply["content"]["status"] != "ok":
            print(f"  first cell failed in {kernel_name}: {reply['content']}")
        return seconds
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def row(label: str, figures: list[float]) -> None:
    each = " ".join(f"{s:.3f}" for s in figures)
    print(f"{label:<34} median {statistics.median(figures):7.3f} s   ({each})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=2, help="cold kernels per way (default 2)")
    parser.add_argument("--warm", type=int, default=5, help="warm kernels per way (default 5)")
    args = parser.parse_args()
    install()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; first cell: {FIRST_CELL!r}")
    template = pool.prestart()
    ready = asyncio.run(template.wait_ready())
    print(f"template {template.pid}: imports {ready['seconds']:.3f} s, ready {ready['wall']:.3f} s after Popen")
    for wait_ready in (False, True):
        way = "after wait_for_ready" if wait_ready else "sent at once"
        row(f"cold python3, {way}", [first_cell_seconds("python3", wait_ready) for _ in range(args.cold)])
        row(f"warm {KERNEL_NAME}, {way}", [first_cell_seconds(KERNEL_NAME, wait_ready) for _ in range(args.warm)])
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
