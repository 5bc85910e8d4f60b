"""A feature-layout change leaves stored data readable: with a throw-away layout registered as
the current one (one extra weighted feature, which moves every factor and interaction column),
every golden receipt still parses, validates and replays, stored pools attach and replay, and a
profile fits and applies under the old layout and the new one with the same result."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from prme_core import features
from prme_core.canonical import sha256_hex
from prme_core.features import FeatureLayout, LayoutMismatch, current_layout, layout_for, layout_of_width
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.pool_ranking import PoolRequest, PoolSet, recorded_lists
from prme_core.learning.snapshot import snapshot_from_receipts
from prme_core.learning.synthetic import synthetic_receipt, synthetic_record
from prme_core.receipts.model import CURRENT_SCHEMA_VERSION, RetrievalReceipt
from prme_core.receipts.pool import PoolColumns
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.multipliers import RankingMultipliers, layout_factors
from prme_core.retrieval.pool_replay import check_pool_replay, replay_pool

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "receipts"
_spec = importlib.util.spec_from_file_location("receipt_fixtures_layout", FIXTURES / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(mf)  # type: ignore[union-attr]
PINNED: dict[str, str] = json.loads((FIXTURES / mf.CHECKSUMS_FILE).read_text(encoding="utf-8"))
OWNER, SCOPES = "alice", ("personal",)

OLD = current_layout()
THROWAWAY = FeatureLayout(
    weights=(*OLD.weights, "throwaway_signal"),  # a weighted feature: every later column moves
    factors=OLD.factors,
    interactions=OLD.interactions,
)
THROWAWAY_SINCE = CURRENT_SCHEMA_VERSION + 1


@pytest.fixture
def throwaway(monkeypatch):
    """Register ``THROWAWAY`` as the newest (current) layout, where production code reads the
    registry: ``features.RECEIPT_LAYOUTS``."""
    monkeypatch.setattr(features, "RECEIPT_LAYOUTS", (*features.RECEIPT_LAYOUTS, (THROWAWAY_SINCE, THROWAWAY)))
    assert current_layout() is THROWAWAY and layout_for(CURRENT_SCHEMA_VERSION) is OLD
    return THROWAWAY


def golden(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def pool_receipt(version: int) -> RetrievalReceipt:
    receipt = RetrievalReceipt.model_validate_json(golden(mf.fixture_name(version)))
    if version >= 11:
        receipt.attach_pool(golden(mf.POOL_FIXTURE))
    return receipt


def test_the_throwaway_layout_moves_every_column_after_the_weights(throwaway):
    assert throwaway.width == OLD.width + 1
    for name in (*OLD.factors, *OLD.interactions):
        assert throwaway.index(name) == OLD.index(name) + 1
    assert layout_of_width(OLD.width) is OLD and layout_of_width(throwaway.width) is throwaway


@pytest.mark.parametrize("version", mf.FIXTURE_VERSIONS)
def test_every_golden_receipt_parses_validates_and_replays_under_a_new_layout(throwaway, version):
    name = mf.fixture_name(version)
    data = golden(name)
    assert hashlib.sha256(data).hexdigest() == PINNED[name]
    receipt = RetrievalReceipt.model_validate_json(data)  # checks the projection digest
    assert receipt_bytes(receipt) == data  # the canonical form, and so the checksum, is unchanged
    if version >= 2:
        receipt.validate()  # replay of every score and the order
        replayed = receipt.replay_ranking()
        assert replayed.order == tuple(c.node_id for c in receipt.candidates)
        assert replayed.scores == tuple(c.score for c in receipt.candidates)


def test_the_fixture_generator_rebuilds_every_golden_file_once_a_newer_version_is_current(monkeypatch):
    """The generator's older-version path (taken by every version once a new one is current)
    rebuilds the same bytes, version 11 bound to its packed pool as before."""
    monkeypatch.setattr(mf, "CURRENT_SCHEMA_VERSION", CURRENT_SCHEMA_VERSION + 1)
    rebuilt = mf.golden_bytes()
    assert set(rebuilt) == set(PINNED)
    for name, data in rebuilt.items():
        assert hashlib.sha256(data).hexdigest() == PINNED[name], name
    assert mf.receipt_v11().packed_pool() == golden(mf.POOL_FIXTURE)


def test_a_stored_pool_attaches_after_a_scoring_weight_is_added(monkeypatch):
    """A new feature's weight field (here a throw-away one, introduced by a later version) is not
    part of what an older receipt's pool recorded, so the pool still binds to its receipt."""
    from prme_core.receipts import model
    from prme_core.retrieval.config import ScoringWeights

    class WithNewWeight(ScoringWeights):
        throwaway_weight: float = 0.0

    stored = RetrievalReceipt.model_validate_json(golden(mf.fixture_name(11)))
    monkeypatch.setattr(
        model, "_SCORING_HISTORY", (*model._SCORING_HISTORY, ("throwaway_weight", THROWAWAY_SINCE, 0.0))
    )
    receipt = stored.model_copy(update={"scoring": WithNewWeight(**stored.scoring.model_dump())})
    assert "throwaway_weight" in receipt.scoring.model_dump()
    receipt.attach_pool(golden(mf.POOL_FIXTURE))  # the replay context matches as version 11 recorded it
    assert receipt.pool_columns().layout is layout_for(11)


@pytest.mark.parametrize("version", [10, 11])
def test_stored_pools_attach_in_their_own_layout_and_replay_under_a_new_layout(throwaway, version):
    receipt = pool_receipt(version)
    columns = receipt.pool_columns()
    assert columns.layout is layout_for(version) and columns.layout is not throwaway
    assert check_pool_replay(receipt)
    if version == 11:  # the store's read path names no layout: the packed width resolves it
        assert PoolColumns.unpack(golden(mf.POOL_FIXTURE)).layout is layout_for(version)


@pytest.mark.parametrize("version", [10, 11])
def test_a_pool_set_in_the_new_layout_ranks_stored_pools_exactly_as_pool_replay(throwaway, version):
    receipt = pool_receipt(version)
    request = PoolRequest(receipt.pool_columns(), (), ())
    new, old = PoolSet([request]), PoolSet([request], OLD)
    assert new.layout is throwaway and new.features.shape[1] == throwaway.width
    assert not np.any(new.features[:, throwaway.index("throwaway_signal")])  # absent: neutral
    for adjustment in (None, RankingMultipliers(lexical=2.0, recency=0.5)):
        replayed = replay_pool(receipt, multipliers=adjustment)
        expected = [([n.bytes for n in replayed.node_ids], list(replayed.scores))]
        assert recorded_lists(new.rank(adjustment), new) == recorded_lists(old.rank(adjustment), old) == expected


def _synthetic_snapshot():
    """Synthetic version-11 receipts with complete pools and a planted lexical signal."""
    rng = random.Random(4)
    planted = [synthetic_receipt(rng, owner=OWNER, query=f"question {i}", pool=40) for i in range(80)]
    receipts = [(receipt, sha256_hex(receipt_bytes(receipt))) for receipt, _ in planted]
    return snapshot_from_receipts(OWNER, receipts, [synthetic_record(rng, r, relevant) for r, relevant in planted])


def _fit(snapshot, fit: str):
    return evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_validation_queries": 10, "fit": fit})


@pytest.mark.parametrize(("fit", "path"), [("pool_ndcg", "pool"), ("judged_pairwise", "judged")])
def test_a_profile_fits_to_the_same_bytes_under_the_old_and_the_new_layout(monkeypatch, fit, path):
    snapshot = _synthetic_snapshot()
    before = _fit(snapshot, fit)
    monkeypatch.setattr(features, "RECEIPT_LAYOUTS", (*features.RECEIPT_LAYOUTS, (THROWAWAY_SINCE, THROWAWAY)))
    after = _fit(snapshot, fit)
    assert before.fit_path == path and before.multipliers.lexical > 1.0  # the planted signal, learnt
    assert after.canonical_bytes() == before.canonical_bytes()


def test_a_profile_applies_to_pools_laid_out_in_either_layout(throwaway):
    """Pools of both layouts rank together; a profile fitted without the new feature leaves it
    at factor 1, and a pool recorded in the new layout ranks as its old-layout twin."""
    rng = random.Random(7)
    receipt, _ = synthetic_receipt(rng, owner=OWNER, query="q", pool=30)
    old_columns = receipt.pool_columns()
    moved = throwaway.remap(old_columns.features, OLD)
    moved[:, throwaway.index("throwaway_signal")] = rng.random()  # recorded, but no weight names it
    new_columns = dataclasses.replace(old_columns, features=moved, layout=throwaway).check()
    profile = RankingMultipliers(semantic=0.5, lexical=3.0)
    assert list(layout_factors(profile.vector(), throwaway)) == [*profile.vector(), 1.0]
    mixed = PoolSet([PoolRequest(old_columns, (), ()), PoolRequest(new_columns, (), ())])
    old_list, new_list = recorded_lists(mixed.rank(profile), mixed)
    alone = PoolSet([PoolRequest(old_columns, (), ())], OLD)
    assert old_list == new_list == recorded_lists(alone.rank(profile), alone)[0]
    with pytest.raises(LayoutMismatch, match="throwaway_signal"):
        PoolSet([PoolRequest(new_columns, (), ())], OLD)  # dropping a recorded value would change scores


def test_remapping_fills_absent_features_with_their_neutral_value():
    old = layout_for(9)
    row = np.arange(1.0, old.width + 1.0)[None, :]
    out = layout_for(10).remap(row, old)
    assert out[0, : old.width].tolist() == row[0].tolist()
    assert out[0, old.width :].tolist() == [0.0] * len(layout_for(10).interactions)
    assert old.remap(out, layout_for(10)).tolist() == row.tolist()
    factorless = FeatureLayout(weights=old.weights, factors=())
    assert old.remap(np.zeros((1, factorless.width)), factorless)[0, old.index("epistemic_weight")] == 1.0


READERS = (
    "prme_core/retrieval/formula.py",
    "prme_core/retrieval/multipliers.py",
    "prme_core/retrieval/ranking.py",
    "prme_core/retrieval/pool_replay.py",
    "prme_core/receipts/pool.py",
    "prme_core/receipts/replay.py",
    "prme_core/receipts/projection.py",
    "prme_core/learning/fit.py",
    "prme_core/learning/pool_fit.py",
    "prme_core/learning/pool_ranking.py",
    "prme_core/learning/offline.py",
)
POSITIONAL = re.compile(
    r"\b(\w+_INDEX|WEIGHT_COUNT|FEATURE_COUNT|INTERACTION_COUNT|INTERACTION_OFFSET|TRACE_FEATURES|FEATURE_LAYOUT)\b"
)
HARD_COUNT = re.compile(
    r"\[:\s*[2-9]\]|\[[2-9]:\]|\(\s*[\d.]+,?\s*\)\s*\*\s*[2-9]\b|uniform\([^)]*,\s*[2-9]\)|index < [2-9]"
)


@pytest.mark.parametrize("path", READERS)
def test_modules_that_read_feature_arrays_name_no_current_layout_position_or_count(path):
    """They take positions from the layout their arrays carry and counts from the models."""
    source = (ROOT / path).read_text(encoding="utf-8")
    assert not POSITIONAL.findall(source)
    assert not HARD_COUNT.findall(source)
