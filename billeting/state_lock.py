"""An exclusive lock on a state directory, held for the life of the process.

``billeting up`` empties its state directory at start: a second one on the
same directory would empty the databases of the first while it runs. The
lock is ``flock`` on a file in the directory, so the kernel releases it
when the holder exits, however it exits; the file holds the holder's pid
for the message the next one prints.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "billeting-up.lock"


class StateDirBusy(Exception):
    """Another process holds the lock; ``pid`` is its pid when it wrote it."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(f"{path} is in use by another billeting up (pid {pid if pid else 'unknown'})")
        self.path = path
        self.pid = pid


class StateLock:
    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self.path = path

    @classmethod
    def acquire(cls, directory: Path) -> StateLock:
        """Create ``directory`` if needed and lock it; raises StateDirBusy."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise StateDirBusy(directory, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd, path)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = -1


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
