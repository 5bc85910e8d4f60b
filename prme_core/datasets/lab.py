"""A small learning scenario the project writes itself: memories, judged real retrievals and
holdout questions with a signal worth learning (no third-party text).

For each topic, one low-salience memory states the repair cost (the only relevant memory of
that topic's questions) and one high-salience note merely mentions the topic. Base scoring's
salience and confidence weights put the vague note first; evidence that favours lexical
matching (and disfavours salience) fixes that. Feedback questions and holdout questions use
different wordings, so the holdout never repeats a training or validation query. Tests,
benchmarks and the sample data of ``prme main`` build on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import NAMESPACE_URL, UUID, uuid5

from prme_core.engine.client import MemoryClient
from prme_core.errors import InvalidInput

NOW = datetime(2024, 6, 1, tzinfo=UTC)
TOPICS = (
    "cat dog garden piano kyoto salmon bicycle tea chess violin marathon python coffee sailing camera novel "
    "yoga pottery tennis baking lantern glacier harbor meteor canoe tulip falcon quartz saddle oboe kettle "
    "walrus cactus mirror anchor ribbon pepper cobalt velvet dune orchid trumpet comet badger cedar pixel "
    "rocket marble hammock tundra vortex willow zephyr amber bison cello drone ember fjord geyser"
).split()


@dataclass
class Lab:
    owner: str
    scopes: tuple[str, ...]
    relevant: dict[str, UUID]


def feedback_question(topic: str) -> str:
    return f"what does the {topic} repair cost"


def holdout_question(topic: str) -> str:
    return f"how much is the {topic} repair"


LAB_OWNER, LAB_SCOPES = "alice", ("personal",)


def build_lab(
    client: MemoryClient,
    owner: str = LAB_OWNER,
    scopes: tuple[str, ...] = LAB_SCOPES,
    topics: tuple[str, ...] = tuple(TOPICS),
    *,
    feedback: bool = True,
    holdout: bool = True,
    signal: str = "relevant",
    holdout_truth: str = "relevant",
    key: str | None = None,
    judged: Callable[[str], None] | None = None,
) -> Lab:
    """Store the memories; record structured-evaluation feedback and register holdout queries.

    ``signal``: "relevant" labels the repair memory relevant (the truth the holdout uses);
    "vague" labels the vague note relevant instead (learnable, but wrong on the holdout);
    "mixed" alternates between the two by topic (no consistent signal to learn).
    ``holdout_truth="vague"`` registers the vague notes as the holdout's relevant sets, so a
    proposal learned from "relevant" feedback passes offline and fails the holdout.
    ``key``: make memory and feedback ids deterministic under this name, so that building the
    same lab again stores and judges nothing twice (holdout registration is idempotent anyway).
    ``judged(topic)`` is called after each topic's feedback (for a progress display).
    """
    items = []
    for topic in topics:
        items.append(
            {
                "content": f"The {topic} repair costs forty dollars at the {topic} workshop",
                "scope": scopes[0],
                "salience": 0.05,
                "confidence": 0.1,
            }
        )
        items.append(
            {
                "content": f"Alice said something about a {topic} once",
                "scope": scopes[0],
                "salience": 1.0,
                "confidence": 1.0,
            }
        )
    if key is not None:
        for item, (topic, kind) in zip(items, ((t, k) for t in topics for k in ("repair", "vague")), strict=True):
            item["id"] = _lab_id(key, owner, kind, topic)
        ids = [item["id"] for item in items]
        relevant = {t: ids[2 * i] for i, t in enumerate(topics)}
        vague = {t: ids[2 * i + 1] for i, t in enumerate(topics)}
        _store_once(client, owner, items)
    else:
        nodes = client.store_batch(owner, items)
        relevant = {t: nodes[2 * i].id for i, t in enumerate(topics)}
        vague = {t: nodes[2 * i + 1].id for i, t in enumerate(topics)}
    if feedback:
        for topic in topics:
            feedback_id = None if key is None else _lab_id(key, owner, "feedback", topic)
            if feedback_id is not None and client.get_relevance(feedback_id, owner) is not None:
                if judged is not None:
                    judged(topic)
                continue
            response = client.retrieve(
                feedback_question(topic), owner=owner, scopes=list(scopes), reference_time=NOW, limit=5
            )
            pick_vague = signal == "vague" or (signal == "mixed" and topics.index(topic) % 2 == 1)
            good = vague[topic] if pick_vague else relevant[topic]
            labels = {r.node_id: r.node_id == good for r in response.results}
            client.record_relevance(
                response.metadata.request_id,
                labels,
                owner=owner,
                method="structured_evaluation",
                feedback_id=feedback_id,
            )
            if judged is not None:
                judged(topic)
    if holdout:
        client.register_holdout_queries(
            owner,
            list(scopes),
            [
                {
                    "query": holdout_question(t),
                    "relevant_node_ids": [vague[t] if holdout_truth == "vague" else relevant[t]],
                    "reference_time": NOW,
                    "limit": 10,
                }
                for t in topics
            ],
        )
    return Lab(owner, tuple(sorted(scopes)), relevant)


def _lab_id(key: str, owner: str, kind: str, topic: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"prme:lab:{key}:{owner}:{kind}:{topic}")


def _store_once(client: MemoryClient, owner: str, items: list[dict]) -> None:
    """Store a keyed lab's memories in one batch unless they are all there already; a partial
    earlier load means the lab changed, and is refused rather than patched."""
    with client.store.transaction() as tx:
        present = tx.existing_node_ids(owner, [item["id"] for item in items])
    if len(present) == len(items):
        return
    if present:
        raise InvalidInput(
            "lab",
            f"{owner} is partly loaded ({len(present)} of {len(items)} memories); the lab changed: use a fresh store",
        )
    client.store_batch(owner, items)


def make_lab(url: str, **kw) -> Lab:
    """Build the lab in the store at ``url`` (a client opened and closed for it)."""
    with MemoryClient(url) as client:
        return build_lab(client, **kw)
