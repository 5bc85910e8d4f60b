"""The cyclic-GC pause around bulk learning code: counted, restored, never leaves GC off."""

import gc
import threading

import pytest

from prme_core.gcpause import cyclic_gc_paused


@pytest.fixture(autouse=True)
def gc_enabled_around_each_test():
    gc.enable()
    yield
    gc.enable()


def test_collection_is_paused_inside_and_resumes_after_also_on_error():
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_pauses_resume_only_when_the_outer_one_ends():
    with cyclic_gc_paused():
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_beforehand_stays_disabled():
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_resume_when_the_last_one_ends():
    first_inside, release_first = threading.Event(), threading.Event()

    def worker():
        with cyclic_gc_paused():
            first_inside.set()
            release_first.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    assert first_inside.wait(10)
    with cyclic_gc_paused():
        release_first.set()
        thread.join(10)
        assert not gc.isenabled()  # the worker's pause ended, this one has not
    assert gc.isenabled()


def test_the_learning_entry_points_run_with_collection_paused(monkeypatch):
    import hashlib
    import random

    from prme_core.learning import observations, offline, snapshot
    from prme_core.learning.synthetic import synthetic_receipt, synthetic_record
    from prme_core.receipts.store import receipt_bytes

    for function in (snapshot.cut_snapshot, snapshot.load_snapshot, observations.prepare, offline.evaluate_prepared):
        assert hasattr(function, "__wrapped__"), function  # wrapped by the pause
    rng = random.Random(3)
    items = [synthetic_receipt(rng, owner="alice", query=f"question {g}", candidates=8) for g in range(6)]
    records = [synthetic_record(rng, receipt, relevant) for receipt, relevant in items]
    cut = snapshot.snapshot_from_receipts(
        "alice", [(r, hashlib.sha256(receipt_bytes(r)).hexdigest()) for r, _ in items], records
    )
    seen = []
    original = observations._validated_labels
    monkeypatch.setattr(
        observations, "_validated_labels", lambda *a, **k: (seen.append(gc.isenabled()), original(*a, **k))[1]
    )
    offline.evaluate_learning(cut, owner="alice", scopes=["personal"])
    assert len(seen) == len(records) and not any(seen) and gc.isenabled()
