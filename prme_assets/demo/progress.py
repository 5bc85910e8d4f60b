"""Progress of ``prme main``'s long steps (loading, judging, each partition's learning run) as
``rich`` bars on stderr: shown on a terminal, off otherwise (tests and logs stay clean) unless
forced with ``--progress`` or ``PRME_PROGRESS=1`` (``PRME_PROGRESS=0`` turns it off).

The demo's data assets run in ``prme main``'s own process (``execute_in_process``), so they
report through the ``Progress`` that ``run_main`` installs (``current``); run from the UI, in
another process, there is none and they report nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PROGRESS_ENV = "PRME_PROGRESS"


def wanted(forced: bool = False) -> bool:
    """Whether to show progress: forced, else ``PRME_PROGRESS``, else whether stderr is a terminal."""
    if forced:
        return True
    setting = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if setting in ("1", "true", "yes", "on"):
        return True
    if setting in ("0", "false", "no", "off"):
        return False
    return sys.stderr.isatty()


class Progress:
    """Bars on stderr when ``enabled``; every method is a no-op otherwise."""

    def __init__(self, enabled: bool) -> None:
        self._bars: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bars

            self._bars = Bars(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True, force_terminal=True),
                transient=False,
            )

    def __enter__(self) -> Progress:
        if self._bars is not None:
            self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.stop()

    @property
    def enabled(self) -> bool:
        return self._bars is not None

    def say(self, message: str) -> bool:
        """Print a line above the bars; False when disabled (the caller prints it itself)."""
        if self._bars is None:
            return False
        self._bars.console.print(message, markup=False, highlight=False)
        return True

    def task(self, description: str, total: int | None) -> Callable[..., None]:
        """A new bar; the returned ``advance(n=1, description=None)`` moves it (and renames it)."""
        if self._bars is None:
            return _nothing
        bars, task_id = self._bars, self._bars.add_task(description, total=total)

        def advance(n: int = 1, description: str | None = None) -> None:
            if description is None:
                bars.advance(task_id, n)
            else:
                bars.update(task_id, advance=n, description=description)

        return advance


def _nothing(n: int = 1, description: str | None = None) -> None:
    return None


_CURRENT: list[Progress] = []


@contextmanager
def reporting(progress: Progress) -> Iterator[Progress]:
    """Make ``progress`` the one the data assets report to, for the duration."""
    _CURRENT.append(progress)
    try:
        yield progress
    finally:
        _CURRENT.remove(progress)


def current() -> Progress:
    """The installed ``Progress``, or a disabled one."""
    return _CURRENT[-1] if _CURRENT else Progress(False)
