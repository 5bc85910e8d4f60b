"""Ctrl-C (SIGINT) and SIGTERM stop a command within seconds, cancel the Dagster runs it started
and surface as one ``Interrupted`` exception (the command prints one line and exits 130).

While a run executes in process, Dagster installs its own SIGINT handler: a signal during a
step interrupts that step, and one between steps is only noted, so ``execute_in_process(...,
raise_on_error=False)`` returns as if the run had merely failed, or had succeeded. So the
command also registers a wakeup pipe (``signal.set_wakeup_fd``: the interpreter writes every
signal's number there, whichever handler runs); a watcher thread reads it, records the signal
and marks this command's unfinished runs canceling, so they end CANCELED, not FAILURE. The
command calls ``raise_if_stopped()`` after each run. A multiprocess executor's step processes
are ended by Dagster itself when its run is interrupted or marked canceling. (A signal during a
DuckDB query reaches Python as DuckDB's "Query interrupted"; the DuckDB backend re-raises it as
``KeyboardInterrupt``, so no ``except Exception`` on the way swallows it.)
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Self
from uuid import uuid4

INTERRUPTED_EXIT = 130
"""128 + SIGINT, what shells report for a command ended by Ctrl-C."""
INVOCATION_TAG = "prme/invocation"
"""Tags every run a command starts, so a signal cancels exactly those runs."""
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop (SIGINT or SIGTERM); its runs were canceled."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name


def signal_name(signum: int | None) -> str:
    return signal.Signals(signum).name if signum is not None else "SIGINT"


class StopSignals:
    """``with StopSignals() as stop:`` — SIGINT/SIGTERM raise ``Interrupted`` outside Dagster runs
    and are never lost inside them (``raise_if_stopped`` after each run)."""

    def __init__(self) -> None:
        self.invocation = uuid4().hex
        self.received: int | None = None
        self._instance = None
        self._lock = threading.Lock()  # canceling runs vs settling them
        self._pipe_lock = threading.Lock()  # reading the pipe and recording what it held, as one step
        self._saved: dict[int, object] = {}
        self._saved_fd: int | None = None
        self._pipe: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None
        self._saved_hook = None

    @property
    def run_tags(self) -> dict[str, str]:
        """Tags for every run the command starts (see ``runs_on``)."""
        return {INVOCATION_TAG: self.invocation}

    def raise_if_stopped(self) -> None:
        if self._pipe is not None:
            self._drain(self._pipe[0])  # a signal the watcher has not read yet counts too
        if self.received is not None:
            raise Interrupted(self.received)

    def settle(self, run_id: str | None = None) -> None:
        """After a run returned (or, without ``run_id``, when the command stops): record every run of
        this command that a signal left canceling or unfinished as canceled."""
        if self.received is None or self._instance is None:
            return
        from dagster import DagsterRunStatus, RunsFilter

        open_statuses = [
            DagsterRunStatus.CANCELING,
            DagsterRunStatus.QUEUED,
            DagsterRunStatus.NOT_STARTED,
            DagsterRunStatus.STARTING,
            DagsterRunStatus.STARTED,
        ]
        message = f"prme stopped on {signal.Signals(self.received).name}"
        with self._lock:
            if run_id is not None:
                run = self._instance.get_run_by_id(run_id)
                runs = [run] if run is not None and run.status == DagsterRunStatus.CANCELING else []
            else:
                runs = self._instance.get_runs(RunsFilter(tags=self.run_tags, statuses=open_statuses))
            for run in runs:
                self._instance.report_run_canceled(run, message=message)

    @contextmanager
    def runs_on(self, instance) -> Iterator[None]:  # a DagsterInstance (dagster loads only when used)
        """Within this block, a signal cancels this command's unfinished runs on ``instance``; leaving
        it on a stop records them canceled (a signal can arrive before a run's own handler is in place)."""
        self._instance = instance
        try:
            yield
        except BaseException:
            if self.received is not None:
                self.settle()
            raise
        finally:
            self._instance = None

    # --- signal plumbing ------------------------------------------------------------------

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        raise Interrupted(signum)

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        """An ``Interrupted`` the handler raised inside a finalizer or a garbage-collection callback
        (SQLAlchemy's weakref callbacks run at any allocation) cannot propagate: Python would print
        it as "Exception ignored" with a traceback. The signal is already in ``received``, so the
        next ``raise_if_stopped`` stops the command; say nothing here. Anything else is reported
        as before."""
        if isinstance(unraisable.exc_value, Interrupted):
            return
        (self._saved_hook or sys.__unraisablehook__)(unraisable)

    def _cancel_runs(self) -> None:
        instance = self._instance
        if instance is None:
            return
        from dagster import DagsterRunStatus, RunsFilter

        unfinished = [
            DagsterRunStatus.QUEUED,
            DagsterRunStatus.NOT_STARTED,
            DagsterRunStatus.STARTING,
            DagsterRunStatus.STARTED,
        ]
        with self._lock:
            try:
                runs = instance.get_runs(RunsFilter(tags=self.run_tags, statuses=unfinished))
                for run in runs:
                    instance.report_run_canceling(run, message=f"prme received {signal.Signals(self.received).name}")
            except Exception:  # noqa: BLE001, S110
                pass  # the instance may be closing: the run then ends FAILURE instead of CANCELED

    def _drain(self, read_fd: int) -> bool:
        """Read pending signal numbers (non-blocking); False at end of file (the pipe closed)."""
        with self._pipe_lock:
            try:
                data = os.read(read_fd, 64)
            except BlockingIOError:
                return True
            except OSError:
                return False
            numbers = [b for b in data if b in _SIGNALS]
            if numbers and self.received is None:
                self.received = numbers[0]
            return bool(data)

    def _watch(self, read_fd: int) -> None:
        while True:
            try:
                select.select([read_fd], [], [])
            except (OSError, ValueError):
                return
            if not self._drain(read_fd):
                return
            if self.received is not None:
                self._cancel_runs()

    def __enter__(self) -> Self:
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may install handlers; the caller's own apply
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        os.set_blocking(read_fd, False)
        self._pipe = (read_fd, write_fd)
        for signum in _SIGNALS:
            self._saved[signum] = signal.signal(signum, self._handle)
        self._saved_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._saved_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self._watcher = threading.Thread(target=self._watch, args=(read_fd,), name="prme-stop-signals", daemon=True)
        self._watcher.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._saved_fd if self._saved_fd is not None else -1)
        if self._saved_hook is not None:
            sys.unraisablehook, self._saved_hook = self._saved_hook, None
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        read_fd, write_fd = self._pipe
        os.close(write_fd)  # the watcher reads end-of-file and returns
        if self._watcher is not None:
            self._watcher.join(timeout=2)
        os.close(read_fd)
        self._pipe = None
