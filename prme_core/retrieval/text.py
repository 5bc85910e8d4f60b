"""Text normalization shared by learning (query grouping) and retrieval (lexical tokens).

Both functions are deterministic: they depend only on the input string and the Unicode
tables of the running Python (NFKC and casefolding), never on locale or hash seeds.
"""

from __future__ import annotations

import re
import unicodedata

LEXICAL_ANALYZER_ID = "prme-lexical-v1"
"""Names the tokenization below; recorded wherever lexical scores are stored."""

_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+")

ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    a an the this that these those
    i me my myself we us our ours ourselves you your yours yourself he him his himself
    she her hers herself it its itself they them their theirs themselves
    am is are was were be been being do does did doing have has had having
    will would shall should can could may might must
    and or but nor if then so than because as while
    of at by for from in into on off out over under up down to with about above below
    between through during before after again against via per
    what which who whom when where why how
    all any both each few more most other some such no not only own same
    too very just also yet here there once
    ll re ve don didn doesn isn wasn aren
""".split()
)
"""Common English function words dropped by ``lexical_tokens`` (our own list)."""


def normalize_query(text: str) -> str:
    """Group key of a query: NFKC, casefold, whitespace runs collapsed to one space, stripped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _WHITESPACE.sub(" ", folded).strip()


def lexical_tokens(text: str) -> list[str]:
    """Letter/digit runs of the NFKC-casefolded text, without stopwords or lone letters."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [
        token
        for token in _WORD.findall(folded)
        if token not in ENGLISH_STOPWORDS and (len(token) > 1 or token.isdigit())
    ]
