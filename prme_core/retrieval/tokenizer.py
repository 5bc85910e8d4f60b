"""The one token counter every budget is measured with (recorded by id in every bundle).

A token is a run of word characters or a single non-space, non-word character (Unicode
``\\w+|[^\\w\\s]``). Tokens never span whitespace, so counts are additive over lines:
``count_tokens(a + "\\n" + b) == count_tokens(a) + count_tokens(b)``. The packer relies on this
to budget a context line by line and still match the count of the rendered whole.
"""

from __future__ import annotations

import re

TOKENIZER_ID = "prme-regex-v1"
_PATTERN = r"\w+|[^\w\s]"
_TOKEN = re.compile(_PATTERN)


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` under ``prme-regex-v1``."""
    return len(_TOKEN.findall(text))


def tokenizer_identity() -> dict[str, str]:
    """The id and pattern of the tokenizer, for receipts and bundles."""
    return {"tokenizer": TOKENIZER_ID, "pattern": _PATTERN}
