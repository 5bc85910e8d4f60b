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

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from prme_core.engine.client import MemoryClient

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
) -> Lab:
    """Store the memories; record structured-evaluation feedback and register holdout queries.

    ``signal``: "relevant" labels the repair memory relevant (the truth the holdout uses);
    "vague" labels the vague note relevant instead (learnable, but wrong on the holdout);
    "mixed" alternates between the two by topic (no consistent signal to learn).
    ``holdout_truth="vague"`` registers the vague notes as the holdout's relevant sets, so a
    proposal learned from "relevant" feedback passes offline and fails the holdout.
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
    nodes = client.store_batch(owner, items)
    relevant = {t: nodes[2 * i].id for i, t in enumerate(topics)}
    vague = {t: nodes[2 * i + 1].id for i, t in enumerate(topics)}
    if feedback:
        for topic in topics:
            response = client.retrieve(
                feedback_question(topic), owner=owner, scopes=list(scopes), reference_time=NOW, limit=5
            )
            pick_vague = signal == "vague" or (signal == "mixed" and topics.index(topic) % 2 == 1)
            good = vague[topic] if pick_vague else relevant[topic]
            labels = {r.node_id: r.node_id == good for r in response.results}
            client.record_relevance(response.metadata.request_id, labels, owner=owner, method="structured_evaluation")
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


def make_lab(url: str, **kw) -> Lab:
    """Build the lab in the store at ``url`` (a client opened and closed for it)."""
    with MemoryClient(url) as client:
        return build_lab(client, **kw)
