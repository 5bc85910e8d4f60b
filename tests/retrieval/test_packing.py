"""Tokenizer, rendering and the token-budgeted context bundle."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from prme_core.canonical import EMPTY_SHA256, sha256_hex
from prme_core.errors import InvalidInput
from prme_core.retrieval.config import PackingConfig
from prme_core.retrieval.packing import ContextBundle, pack
from prme_core.retrieval.rendering import PackItem, guidance_text, render_entry, render_header
from prme_core.retrieval.tokenizer import TOKENIZER_ID, count_tokens, tokenizer_identity

REF_TIME = datetime(2024, 3, 1, 12, tzinfo=UTC)
CREATED = datetime(2023, 5, 10, 9, 30, tzinfo=UTC)
EVENT = datetime(2023, 5, 8, 15, 56, tzinfo=UTC)


def item(
    rank: int,
    content: str = "note",
    *,
    score: float = 0.5,
    node_type: str = "fact",
    paths: tuple[str, ...] = ("lexical",),
    **extra,
) -> PackItem:
    fields = dict(event_time=EVENT, created_at=CREATED, epistemic_type="observed", scope="personal") | extra
    return PackItem(
        node_id=UUID(int=rank + 1), rank=rank, score=score, node_type=node_type, content=content, paths=paths, **fields
    )


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def config(**overrides) -> PackingConfig:
    base = dict(
        token_budget=2048,
        min_fidelity="full",
        multipath_ordering="score",
        context_guidance_mode="off",
        context_format="compact",
    )
    return PackingConfig(**(base | overrides))


def packed_ranks(bundle: ContextBundle) -> list[int]:
    return [e.rank for e in bundle.entries]


# --- tokenizer ---------------------------------------------------------------------------------


def test_tokens_are_word_runs_and_single_punctuation_marks():
    assert count_tokens("Hello, wörld!  it's 2024-03-01") == 12
    assert count_tokens("") == 0 and count_tokens(" \n\t ") == 0


@given(st.text(), st.text(), st.sampled_from(["\n", " ", "\r\n", "\t"]))
def test_token_counts_add_up_across_whitespace(a, b, sep):
    assert count_tokens(a + sep + b) == count_tokens(a) + count_tokens(b)


def test_tokenizer_identity_names_the_id_and_pattern():
    assert tokenizer_identity() == {"tokenizer": TOKENIZER_ID, "pattern": r"\w+|[^\w\s]"}


# --- rendering ---------------------------------------------------------------------------------


def test_compact_entries_follow_the_documented_shapes():
    it = item(0, "Alice moved to Lisbon")
    assert render_entry(it, 3, "full", "compact") == "[3] fact · 2023-05-08 · observed · Alice moved to Lisbon"
    assert render_entry(it, 3, "prose", "compact") == "[3] Alice moved to Lisbon"
    assert render_entry(it, 3, "reference", "compact") == f"[3] fact · 2023-05-08 · reference only · {it.node_id}"


def test_compact_date_falls_back_to_the_recorded_date():
    it = item(0).model_copy(update={"event_time": None})
    assert render_entry(it, 1, "full", "compact").startswith("[1] fact · 2023-05-10 · ")


def test_auditable_entries_carry_exactly_the_documented_fields():
    full = item(0, "x", session_id="s1", valid_from=CREATED)
    assert json.loads(render_entry(full, 2, "full", "auditable")) == {
        "ref": 2,
        "id": str(full.node_id),
        "type": "fact",
        "scope": "personal",
        "time": "2023-05-08T15:56:00Z",
        "recorded": "2023-05-10T09:30:00Z",
        "valid_from": "2023-05-10T09:30:00Z",
        "epistemic": "observed",
        "session": "s1",
        "content": "x",
    }
    bare = full.model_copy(update={"event_time": None, "session_id": None, "valid_from": None})
    assert set(json.loads(render_entry(bare, 2, "full", "auditable"))) == {
        "ref",
        "id",
        "type",
        "scope",
        "recorded",
        "epistemic",
        "content",
    }
    assert json.loads(render_entry(full, 2, "prose", "auditable")) == {
        "ref": 2,
        "id": str(full.node_id),
        "content": "x",
    }
    assert json.loads(render_entry(full, 2, "reference", "auditable")) == {
        "ref": 2,
        "id": str(full.node_id),
        "type": "fact",
        "time": "2023-05-08T15:56:00Z",
        "reference_only": True,
    }


@pytest.mark.parametrize("fmt", ["auditable", "compact"])
@pytest.mark.parametrize("representation", ["full", "prose", "reference"])
def test_every_rendering_is_a_single_line(fmt, representation):
    text = render_entry(item(0, "one\ntwo\r\nthree\rfour", node_type="fact\nx"), 1, representation, fmt)
    assert "\n" not in text and "\r" not in text


def test_headers_are_one_line_in_each_format():
    assert render_header(REF_TIME, "compact") == "PRME context · reference time 2024-03-01T12:00:00Z"
    assert json.loads(render_header(REF_TIME, "auditable")) == {
        "context": "prme",
        "format": "auditable",
        "reference_time": "2024-03-01T12:00:00Z",
    }


def test_guidance_texts_stay_short_and_single_line():
    for mode in ("temporal", "all"):
        text = guidance_text(mode, temporal_query=True, reference_time=REF_TIME)
        assert "2024-03-01T12:00:00Z" in text and "\n" not in text and count_tokens(text) < 60
    assert "hypothetical" in guidance_text("all", temporal_query=False, reference_time=REF_TIME)


# --- budget, additivity, integrity ------------------------------------------------------------

_items = st.lists(
    st.builds(
        lambda content, score, node_type, paths, dated: dict(
            content=content,
            score=score,
            node_type=node_type,
            paths=paths,
            event_time=EVENT if dated else None,
            session_id="s\n1" if dated else None,
        ),
        st.text(max_size=120),
        st.floats(-1.0, 2.0),
        st.sampled_from(["fact", "event", "instruction", "preference"]),
        st.lists(st.sampled_from(["lexical", "semantic", "graph"]), max_size=3, unique=True).map(tuple),
        st.booleans(),
    ),
    max_size=12,
).map(lambda specs: [item(rank, **spec) for rank, spec in enumerate(specs)])

_configs = st.builds(
    PackingConfig,
    token_budget=st.integers(16, 600),
    min_fidelity=st.sampled_from(["full", "prose", "reference"]),
    multipath_ordering=st.sampled_from(["score", "density", "balanced"]),
    context_guidance_mode=st.sampled_from(["off", "temporal", "all"]),
    context_format=st.sampled_from(["auditable", "compact"]),
)


@settings(max_examples=200, deadline=None)
@given(_items, _configs, st.booleans())
def test_rendered_bundle_never_exceeds_the_budget(items, cfg, temporal_query):
    bundle = pack(items, cfg, reference_time=REF_TIME, temporal_query=temporal_query)
    assert count_tokens(bundle.render()) == bundle.tokens_used <= cfg.token_budget
    assert sorted(bundle.included_ids() + bundle.excluded_ids) == sorted(i.node_id for i in items)
    assert ContextBundle.model_validate_json(bundle.model_dump_json()) == bundle
    if cfg.context_format == "auditable":
        by_id = {i.node_id: i for i in items}
        assert all(json.loads(e.text)["content"] == by_id[e.node_id].content for e in bundle.entries if e.has_content)


def test_tokens_used_is_the_sum_of_the_line_costs():
    bundle = pack(
        [item(r, words(r + 1)) for r in range(4)],
        config(context_guidance_mode="all"),
        reference_time=REF_TIME,
        temporal_query=True,
    )
    lines = [bundle.header, bundle.guidance, *(e.text for e in bundle.entries)]
    assert bundle.tokens_used == sum(count_tokens(line) for line in lines)
    assert bundle.tokens_used + bundle.budget_remaining == bundle.token_budget


def test_tampered_tokens_used_is_rejected():
    data = pack([item(0), item(1)], config(), reference_time=REF_TIME, temporal_query=False).model_dump()
    data["tokens_used"] += 1
    data["budget_remaining"] -= 1
    with pytest.raises(ValidationError, match="tokens_used"):
        ContextBundle.model_validate(data)


def test_duplicate_refs_are_rejected():
    data = pack([item(0), item(1)], config(), reference_time=REF_TIME, temporal_query=False).model_dump()
    data["entries"][1]["ref"] = 1
    with pytest.raises(ValidationError, match="refs"):
        ContextBundle.model_validate(data)


def test_an_entry_also_listed_as_excluded_is_rejected():
    data = pack([item(0), item(1)], config(), reference_time=REF_TIME, temporal_query=False).model_dump()
    data["excluded_ids"] = [data["entries"][0]["node_id"]]
    with pytest.raises(ValidationError, match="disjoint"):
        ContextBundle.model_validate(data)


def test_bundle_with_an_entry_of_wrong_token_cost_is_rejected():
    bundle = pack([item(0, "a b c"), item(1, "d e f")], config(), reference_time=REF_TIME, temporal_query=False)
    wrong = bundle.entries[1].model_copy(update={"token_cost": bundle.entries[1].token_cost + 1})
    data = bundle.model_dump()
    data["entries"] = [data["entries"][0], wrong.model_dump()]
    data["tokens_used"] += 1
    data["budget_remaining"] -= 1
    with pytest.raises(ValidationError, match="token_cost"):
        ContextBundle.model_validate(data)


# --- ordering policies ------------------------------------------------------------------------


def _three_way_items() -> list[PackItem]:
    """Score order 0,1,2; density order 1,2,0; balanced order 1,0,2."""
    return [
        item(0, words(120), score=0.9, paths=("semantic",)),
        item(1, words(5), score=0.8, paths=("lexical", "semantic")),
        item(2, "ok", score=0.5, paths=("lexical",)),
    ]


@pytest.mark.parametrize("policy, expected", [("score", [0, 1, 2]), ("density", [1, 2, 0]), ("balanced", [1, 0, 2])])
def test_each_ordering_policy_sets_the_entry_order(policy, expected):
    bundle = pack(
        _three_way_items(),
        config(token_budget=400, multipath_ordering=policy),
        reference_time=REF_TIME,
        temporal_query=False,
    )
    assert bundle.multipath_ordering == policy
    assert packed_ranks(bundle) == expected
    assert [e.ref for e in bundle.entries] == [1, 2, 3]


def test_balanced_discounts_entries_longer_than_a_quarter_of_the_budget():
    items = [
        item(0, words(120), score=0.9),
        item(1, words(3), score=0.75, paths=("lexical", "semantic")),
        item(2, words(3), score=0.72),
    ]
    bundle = pack(
        items, config(token_budget=400, multipath_ordering="balanced"), reference_time=REF_TIME, temporal_query=False
    )
    assert packed_ranks(bundle) == [1, 2, 0]  # 0.9 * 0.75 = 0.675 < 0.72 * (1 - 0.25 * 16/100)


def test_balanced_without_a_multi_path_item_leads_with_the_best_ranked():
    items = [item(0, words(120), score=0.9), item(1, words(3), score=0.75), item(2, words(3), score=0.72)]
    bundle = pack(
        items, config(token_budget=400, multipath_ordering="balanced"), reference_time=REF_TIME, temporal_query=False
    )
    assert packed_ranks(bundle) == [0, 1, 2]


def test_priority_tier_is_packed_before_better_ranked_items():
    items = [
        item(0, score=0.9),
        item(1, score=0.8),
        item(2, score=0.1, node_type="preference"),
        item(3, score=0.05, node_type="instruction"),
    ]
    for policy in ("score", "density", "balanced"):
        bundle = pack(items, config(multipath_ordering=policy), reference_time=REF_TIME, temporal_query=False)
        assert set(packed_ranks(bundle)[:2]) == {2, 3}


# --- formats and guidance ---------------------------------------------------------------------


def test_auditable_bundle_lines_parse_as_json_with_their_refs():
    bundle = pack(
        [item(r) for r in range(3)], config(context_format="auditable"), reference_time=REF_TIME, temporal_query=False
    )
    assert bundle.context_format == "auditable"
    header, *lines = bundle.render().split("\n")
    assert json.loads(header)["format"] == "auditable"
    assert [json.loads(line)["ref"] for line in lines] == [1, 2, 3]


def test_compact_bundle_lines_start_with_their_ref():
    bundle = pack(
        [item(r) for r in range(3)], config(context_format="compact"), reference_time=REF_TIME, temporal_query=False
    )
    assert bundle.context_format == "compact"
    header, *lines = bundle.render().split("\n")
    assert header.startswith("PRME context")
    assert all(line.startswith(f"[{n}] ") for n, line in enumerate(lines, start=1))


@pytest.mark.parametrize(
    "mode, temporal_query, has_guidance",
    [
        ("off", True, False),
        ("off", False, False),
        ("temporal", True, True),
        ("temporal", False, False),
        ("all", True, True),
        ("all", False, True),
    ],
)
def test_guidance_line_appears_only_as_the_mode_asks(mode, temporal_query, has_guidance):
    bundle = pack([item(0)], config(context_guidance_mode=mode), reference_time=REF_TIME, temporal_query=temporal_query)
    assert (bundle.guidance is not None) == has_guidance
    assert len(bundle.render().split("\n")) == 1 + has_guidance + 1
    assert bundle.context_guidance_mode == mode


# --- fidelity, truncation, empty bundles ------------------------------------------------------


def _budget_for(it: PackItem, representation: str) -> int:
    return count_tokens(render_header(REF_TIME, "compact")) + count_tokens(
        render_entry(it, 1, representation, "compact")
    )


@pytest.mark.parametrize(
    "min_fidelity, budget_fits, expected",
    [
        ("full", "full", "full"),
        ("full", "prose", None),
        ("prose", "prose", "prose"),
        ("prose", "reference", None),
        ("reference", "prose", "prose"),
        ("reference", "reference", "reference"),
    ],
)
def test_an_item_too_large_falls_back_only_as_far_as_min_fidelity(min_fidelity, budget_fits, expected):
    big = item(0, words(100))
    bundle = pack(
        [big],
        config(token_budget=_budget_for(big, budget_fits), min_fidelity=min_fidelity),
        reference_time=REF_TIME,
        temporal_query=False,
    )
    entry = bundle.entry(big.node_id)
    if expected is None:
        assert entry is None and bundle.excluded_ids == (big.node_id,)
    else:
        assert entry.representation == expected
        assert entry.has_content == (expected != "reference")
        assert bundle.budget_remaining == 0


def test_content_is_never_truncated():
    content = "first line\nsecond line with " + words(40)
    for fmt in ("auditable", "compact"):
        bundle = pack(
            [item(0, content), item(1, words(500))],
            config(token_budget=300, context_format=fmt),
            reference_time=REF_TIME,
            temporal_query=False,
        )
        assert bundle.excluded_ids == (UUID(int=2),)
        text = bundle.entries[0].text
        if fmt == "auditable":
            assert json.loads(text)["content"] == content
        else:
            assert text.endswith(content.replace("\n", " / "))


def test_empty_bundle_renders_empty_and_hashes_to_the_empty_digest():
    bundle = pack([], config(context_guidance_mode="all"), reference_time=REF_TIME, temporal_query=True)
    assert bundle.render() == "" and bundle.header == "" and bundle.guidance is None
    assert bundle.context_sha256() == EMPTY_SHA256
    assert bundle.tokens_used == 0 and bundle.budget_remaining == bundle.token_budget


def test_header_over_budget_excludes_every_item_in_rank_order():
    items = [item(2), item(0), item(1)]
    bundle = pack(
        items, config(token_budget=16, context_format="auditable"), reference_time=REF_TIME, temporal_query=False
    )
    assert bundle.entries == () and bundle.render() == ""
    assert bundle.excluded_ids == (UUID(int=1), UUID(int=2), UUID(int=3))


def test_excluded_ids_are_listed_in_rank_order():
    items = [item(0, words(300)), item(1), item(2, words(300)), item(3)]
    bundle = pack(
        items, config(token_budget=100, multipath_ordering="density"), reference_time=REF_TIME, temporal_query=False
    )
    assert bundle.excluded_ids == (UUID(int=1), UUID(int=3))
    assert bundle.context_sha256() == sha256_hex(bundle.render())


# --- inputs ------------------------------------------------------------------------------------


def test_duplicate_node_ids_are_rejected():
    with pytest.raises(InvalidInput, match="items"):
        pack([item(0), item(0).model_copy(update={"rank": 1})], config(), reference_time=REF_TIME, temporal_query=False)


def test_naive_reference_time_is_rejected():
    with pytest.raises(InvalidInput, match="reference_time"):
        pack([item(0)], config(), reference_time=REF_TIME.replace(tzinfo=None), temporal_query=False)


def test_reference_time_is_recorded_in_utc():
    local = REF_TIME.astimezone(timezone(timedelta(hours=5)))
    bundle = pack([item(0)], config(), reference_time=local, temporal_query=False)
    assert bundle.reference_time == REF_TIME and bundle.header.endswith("2024-03-01T12:00:00Z")
