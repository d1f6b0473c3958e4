"""Progress bars on stderr (rich), shown only on a terminal.

A command whose stderr is a pipe or a file prints nothing here, so that its
errors stay one line and logs stay clean.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Bars:
    """A set of named bars; ``step(name)`` advances one. Thread-safe (rich's lock)."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._tasks: dict[str, int] = {}

    def add(self, name: str, total: int) -> None:
        if self._progress is not None:
            self._tasks[name] = self._progress.add_task(name, total=total)

    def step(self, name: str, amount: int = 1) -> None:
        if self._progress is not None and name in self._tasks:
            self._progress.advance(self._tasks[name], amount)


@contextmanager
def bars(enabled: bool = True, *, console: Console | None = None) -> Iterator[Bars]:
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield Bars(None)
        return
    with Progress(TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        yield Bars(progress)


def show_progress(flag: bool | None) -> bool:
    """--progress/--no-progress, else: on a terminal."""
    return sys.stderr.isatty() if flag is None else flag
