"""A kernel the tests drive cell by cell: run code, collect what it printed, raised and published."""
from __future__ import annotations

import queue
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_client.manager import KernelManager


@dataclass
class Result:
    status: str                       # "ok" or "error"
    ename: str = ""
    evalue: str = ""
    text: str = ""
    displays: list[dict] = field(default_factory=list)   # display_data bundles, in order


class Kernel:
    """One kernel in ``cwd`` (python3, or ``kernel_name``); ``run`` executes code and waits for it to finish."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120,
                 kernel_name: str = "python3"):
        self.km = KernelManager(kernel_name=kernel_name)
        self.km.start_kernel(cwd=str(cwd), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.timeout = timeout

    def run(self, code: str, timeout: float | None = None) -> Result:
        # stop_on_error=False: after an error the kernel aborts requests that arrive before it has set up the
        # abort's end, and the next run, sent as soon as this one's reply is read, could come back "aborted"
        msg_id = self.kc.execute(code, store_history=False, allow_stdin=False, stop_on_error=False)
        result = Result(status="ok")
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=timeout or self.timeout)
            except queue.Empty:
                raise TimeoutError(f"the kernel did not finish within {timeout or self.timeout} s:\n"
                                   f"{code[:300]}") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                result.text += content["text"]
            elif kind == "error":
                result.status, result.ename, result.evalue = "error", content["ename"], content["evalue"]
            elif kind == "display_data":
                result.displays.append(content["data"])
            elif kind == "status" and content["execution_state"] == "idle":
                break
        while True:
            reply = self.kc.get_shell_msg(timeout=timeout or self.timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        if reply["content"]["status"] != "ok" and result.status == "ok":
            result.status = "error"
        return result

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
