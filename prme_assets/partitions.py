"""The one partitions definition of the learning pipeline and its key codec.

A key names an owner and an exact normalized scope set: ``<owner>::<scope>+<scope>``. The owner
is percent-encoded (only letters, digits, ``-``, ``_`` and ``@`` stay literal), so ``::``,
``+``, ``...`` and control characters — which Dagster keys cannot hold or which would make a key
ambiguous — never appear unescaped; scope names are lowercase identifiers by construction.
"""

from urllib.parse import unquote

import dagster as dg

from prme_core.errors import InvalidInput
from prme_core.validation import check_owner, check_scope_set

LEARNING_TARGETS = dg.DynamicPartitionsDefinition(name="prme_learning_targets")
SEPARATOR = "::"
_LITERAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_@")


def _escape(text: str) -> str:
    return "".join(c if c in _LITERAL else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in text)


def encode_target(owner: str, scopes) -> str:
    """The partition key of (owner, exact scope set)."""
    owner = check_owner(owner)
    names = check_scope_set(scopes)  # whole-string names: "personal\n" is not one
    return f"{_escape(owner)}{SEPARATOR}{'+'.join(names)}"


def decode_target(key: str) -> tuple[str, tuple[str, ...]]:
    """(owner, scopes) of a partition key; a key this codec did not produce is rejected."""
    if not isinstance(key, str) or key.count(SEPARATOR) != 1:
        raise InvalidInput("partition_key", f"{key!r} is not '<owner>::<scope>+<scope>'")
    encoded, scope_part = key.split(SEPARATOR)
    owner = unquote(encoded, errors="strict")
    scopes = tuple(scope_part.split("+"))
    if encode_target(owner, scopes) != key:
        raise InvalidInput(
            "partition_key", f"{key!r} is not in canonical form (owner percent-encoded, scopes sorted and unique)"
        )
    return owner, scopes
