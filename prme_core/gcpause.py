"""Pause Python's cyclic garbage collector while bulk code builds many acyclic objects.

A 100k-record snapshot holds millions of small containers. Each of them counts towards the
collector's thresholds, so while such a structure is built, full collections run again and
again over an ever larger heap, and find nothing: every object there is freed by reference
counting. At 100k records these collections cost 5–7 s of a ~30 s learning run
(``python -m benchmarks.learning``). Pausing collection for the duration is safe: cycles created
meanwhile are collected once it resumes. The pause is process-wide, so it is counted: with
overlapping pauses (threads, nesting) collection resumes when the last one ends, and only if it
was enabled when the first one began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Context manager (also usable as a decorator) pausing cyclic garbage collection."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
