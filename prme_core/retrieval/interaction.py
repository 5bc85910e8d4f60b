"""Query–memory interaction features (layout 2): computed at retrieval from the query and the
memory text, recorded in every trace, weighted in formula 1.

Definitions (content terms are ``text.lexical_tokens``: letter/digit runs of the NFKC-casefolded
text without stopwords or lone letters):

* ``term_coverage`` = |Q ∩ T(m)| / |Q|, Q the query's distinct content terms, T(m) the memory's;
* ``bigram_overlap`` = |B(q) ∩ B(m)| / |B(q)|, B(x) the distinct pairs of adjacent content terms
  of x (adjacent after stopwords are dropped, so "cat named Miso" gives (cat, named), (named, miso));
* ``entity_match`` = |N(q) ∩ T(m)| / |N(q)|, N(q) the query's name-like terms: word runs of the
  NFKC (not casefolded) query whose first character is uppercase and that do not start a
  sentence (the first word, or the first word after '.', '!' or '?'), taken as content terms.
  A memory's leading "Speaker:" name is part of its text, so it counts as any other term.
  Scripts without case have no name-like terms.

Each is 0 when its denominator is 0. Every value is one division of two small integers, which
IEEE 754 rounds the same way on every machine, so traces are bit-stable. Per-row term and bigram
sets are built on first use and kept in ``corpus.extras``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from prme_core.features import INTERACTION_NAMES
from prme_core.retrieval.corpus import Corpus
from prme_core.retrieval.text import lexical_tokens

_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"[.!?]")
_CACHE_KEY = "interaction_terms"

Terms = tuple[frozenset[str], frozenset[tuple[str, str]]]


def bigrams(tokens: Sequence[str]) -> frozenset[tuple[str, str]]:
    return frozenset(zip(tokens, tokens[1:]))


def name_terms(query: str) -> frozenset[str]:
    """The query's name-like content terms (see the module docstring)."""
    text = unicodedata.normalize("NFKC", query)
    names: set[str] = set()
    end = 0
    first = True
    for match in _WORD.finditer(text):
        initial = first or bool(_SENTENCE_END.search(text, end, match.start()))
        first, end = False, match.end()
        word = match.group()
        if not initial and word[0].isupper():
            names.update(lexical_tokens(word))
    return frozenset(names)


class QueryTerms:
    """What the interaction features need from one query (computed once per request)."""

    def __init__(self, query: str) -> None:
        tokens = lexical_tokens(query)
        self.terms = frozenset(tokens)
        self.bigrams = bigrams(tokens)
        self.names = name_terms(query)


def _row_terms(corpus: Corpus, row: int) -> Terms:
    cache: dict[int, Terms] = corpus.extras.setdefault(_CACHE_KEY, {})
    found = cache.get(row)
    if found is None:
        tokens = lexical_tokens(corpus.content[row])
        found = cache[row] = (frozenset(tokens), bigrams(tokens))
    return found


def _share(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def interaction_features(query: QueryTerms, corpus: Corpus, rows: Sequence[int]) -> np.ndarray:
    """(len(rows), 3) float64 matrix in ``INTERACTION_NAMES`` order, each value in [0, 1]."""
    q_terms, q_bigrams, q_names = query.terms, query.bigrams, query.names
    if not q_terms or not rows:
        return np.zeros((len(rows), len(INTERACTION_NAMES)), dtype=np.float64)
    nt, nb, nn = len(q_terms), len(q_bigrams), len(q_names)
    cache: dict[int, Terms] = corpus.extras.setdefault(_CACHE_KEY, {})
    values = []  # one Python list, converted once (assigning numpy cells one by one cost more)
    for row in rows:
        found = cache.get(row)
        terms, pairs = found if found is not None else _row_terms(corpus, row)
        values.append(
            (
                len(q_terms & terms) / nt,
                _share(len(q_bigrams & pairs), nb),
                _share(len(q_names & terms), nn),
            )
        )
    return np.array(values, dtype=np.float64).reshape(len(rows), len(INTERACTION_NAMES))
