"""Stopping a process a test started."""
from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable


def stop_process(process: subprocess.Popen, sig: int = signal.SIGTERM, *, timeout: float = 20.0,
                 what: str = "the process", output: Callable[[], str] = lambda: "",
                 must_obey: bool = True) -> int:
    """Send ``sig`` (unless it has exited already) and wait up to ``timeout``
    seconds; returns the exit status. One that ignores the signal is killed
    and, when ``must_obey``, fails the test with ``output()``."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
        if must_obey:
            raise AssertionError(f"{what} ignored signal {sig} for {timeout:g} s:\n{output()}") from None
        return code
