"""A stop signal that lands inside a garbage-collection callback is kept, not printed: the
command still stops at its next check, with its one line and no "Exception ignored" traceback."""

from __future__ import annotations

import gc
import signal
import sys
import weakref

import pytest

from prme_assets.interrupts import Interrupted, StopSignals


class _Node:
    pass


def test_an_interrupt_raised_in_a_gc_callback_is_kept_silently(capsys):
    def callback(_ref):  # what the SIGINT handler does when the signal lands in such a callback
        raise Interrupted(signal.SIGINT)

    with StopSignals() as stop:
        stop.received = signal.SIGINT
        node = _Node()
        ref = weakref.ref(node, callback)
        del node
        gc.collect()
        assert ref() is None
        with pytest.raises(Interrupted):
            stop.raise_if_stopped()
    assert "Exception ignored" not in capsys.readouterr().err


def test_other_unraisable_errors_are_still_reported_and_the_hook_is_restored():
    before = sys.unraisablehook
    seen = []

    def hook(unraisable):
        seen.append(unraisable)

    sys.unraisablehook = hook
    try:
        with StopSignals():

            def callback(_ref):
                raise ValueError("a real bug in a callback")

            node = _Node()
            ref = weakref.ref(node, callback)
            del node
            gc.collect()
            assert ref() is None
        assert sys.unraisablehook is hook
    finally:
        sys.unraisablehook = before
    assert [type(u.exc_value) for u in seen] == [ValueError]
