"""The sample data ``prme main`` learns on when given no LoCoMo file: a few owners generated from
a seed with the learning lab (``lab.py``), no third-party text, nothing to download.

Each owner is one (owner, scope) learning target with a different story, so one run shows both
what activates and the gates' expected "no"s:

- ``ada`` judges 180 topics, always preferring the precise repair note over the salient vague
  mention: a consistent signal the offline gate and the full-retrieval holdout both confirm, so
  a profile activates.
- ``ben`` judges 6 topics: too few judged queries (coverage says how many more it needs).
- ``cyd`` judges 180 topics but alternates which memory it prefers: no consistent signal, so
  the offline gate finds no improvement.

Ids are deterministic (``lab.build_lab(key=...)``), so loading the sample again stores, judges
and registers nothing twice. The gates are the production defaults; nothing here is special to
them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from prme_core.datasets.lab import TOPICS, build_lab
from prme_core.engine.client import MemoryClient

SAMPLE_SEED = 29
SAMPLE_SCOPE = "personal"
SAMPLE_KEY = "sample-v2"
"""Names the sample's ids; a change to what the sample stores must change it."""

EXTRA_TOPICS = (
    "abacus banjo biscuit blizzard boulder buckle candle canvas caravan carousel cashew cathedral "
    "chimney cinnamon clarinet compass cottage crayon cricket crystal dolphin domino easel elevator "
    "emerald feather fountain gazebo ginger goblet granite guitar hedgehog helmet hornet iceberg igloo "
    "jigsaw kayak kiwi ladder lagoon lemonade lighthouse lobster mandolin mango meadow mitten mosaic "
    "nutmeg oasis octopus paddle parrot pebble "
    "acorn almond antler apron archway attic avocado awning bagpipe balcony bamboo barrel beacon "
    "beehive blanket bonnet bookcase bracelet brooch bucket burrow cabin cameo canal candelabra "
    "carpet chalet chariot chestnut chisel clover cocoon coral cornet crane cupboard cymbal daisy "
    "doorbell dragonfly drawbridge dumpling eggplant elm fern ferry fiddle firefly flute fossil "
    "gable garnet gondola gramophone hatchet hazelnut heron hourglass jasmine juniper kiln lantana "
    "lilac locket loom magnolia mallet maple marimba mussel nectarine oar obelisk otter pagoda "
    "papaya pelican pendulum periscope pinecone plank quill raft reindeer rudder saffron sapphire "
    "scarecrow seashell sextant sled spindle spruce squid stirrup sundial tambourine teapot thimble "
    "toboggan topaz trellis trombone turnip ukulele umbrella walnut wagon weathervane windmill yacht"
).split()
"""More one-word topics beside the lab's sixty, so an owner can judge 180 distinct ones (enough
for 20 validation groups at the default 15% validation share)."""
VOCABULARY = tuple(TOPICS) + tuple(EXTRA_TOPICS)


@dataclass(frozen=True)
class SampleOwner:
    owner: str
    topics: int
    signal: str
    """The lab's ``signal``: "relevant" (consistent) or "mixed" (no consistent preference)."""
    story: str
    """What the gates should conclude, in words (for the documentation and the demo's metadata)."""


SAMPLE_OWNERS = (
    SampleOwner("ada", 180, "relevant", "a consistent signal: the gates accept and a profile activates"),
    SampleOwner("ben", 6, "relevant", "too few judged queries: coverage says how many more"),
    SampleOwner("cyd", 180, "mixed", "judgments that disagree: no improvement to learn"),
)


@dataclass(frozen=True)
class LoadedOwner:
    owner: str
    topics: int
    memories: int
    judged: int
    holdout_questions: int


def owner_topics(owner: SampleOwner, seed: int = SAMPLE_SEED) -> tuple[str, ...]:
    """The owner's topics: a seeded sample of the vocabulary (the same for the same seed)."""
    if owner.topics > len(VOCABULARY):
        raise ValueError(f"{owner.owner}: {owner.topics} topics, the vocabulary has {len(VOCABULARY)}")
    return tuple(random.Random(f"{seed}:{owner.owner}").sample(VOCABULARY, owner.topics))


def load_sample(
    client: MemoryClient,
    *,
    seed: int = SAMPLE_SEED,
    owners: tuple[SampleOwner, ...] = SAMPLE_OWNERS,
    judged: Callable[[str], None] | None = None,
) -> list[LoadedOwner]:
    """Store, judge and register every owner's lab (idempotent); ``judged(owner)`` is called
    after each judged topic (for a progress display; ``sample_size`` is the total)."""
    loaded = []
    for owner in owners:
        topics = owner_topics(owner, seed)
        build_lab(
            client,
            owner=owner.owner,
            scopes=(SAMPLE_SCOPE,),
            topics=topics,
            signal=owner.signal,
            key=f"{SAMPLE_KEY}:{seed}",
            judged=None if judged is None else (lambda _topic, name=owner.owner: judged(name)),
        )
        loaded.append(
            LoadedOwner(
                owner.owner,
                len(topics),
                memories=sum(1 for _ in client.iterate(owner.owner, page_size=1000)),
                judged=len(client.list_relevance(owner.owner, limit=1000)),
                holdout_questions=len(client.list_holdout_queries(owner.owner, [SAMPLE_SCOPE])),
            )
        )
    return loaded


def sample_size(owners: tuple[SampleOwner, ...] = SAMPLE_OWNERS) -> int:
    """How many topics the sample judges in all (a progress bar's total)."""
    return sum(o.topics for o in owners)
