"""Verifying the paired receipts of a full-retrieval holdout: each arm is a verified receipt of
the owner and scope set, ran with the declared multipliers, and both arms are the identical
request apart from the declared change (``evaluate_full_retrieval`` calls these first)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from prme_core.canonical import is_sha256_hex, sha256_hex
from prme_core.errors import HoldoutIntegrityError, InvalidInput, ReceiptNotFound
from prme_core.receipts.model import EXECUTION_SINCE, RetrievalReceipt
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.multipliers import UNITY, RankingMultipliers
from prme_core.retrieval.text import normalize_query

MIN_SCHEMA_VERSION = EXECUTION_SINCE
# Execution parameters that may differ between the arms: the declared change and how it was resolved.
FREE_PARAMETERS = ("ranking_multipliers", "ranking_profile")
# Request fields both arms must record identically.
PAIRED_FIELDS = (
    "reference_time",
    "scoring",
    "packing",
    "min_score",
    "result_limit",
    "retrieval_mode",
    "time_from",
    "time_to",
)


def index_receipts(receipts: Any) -> dict[UUID, tuple[RetrievalReceipt, str]]:
    if not isinstance(receipts, Mapping):
        raise InvalidInput("receipts", "must map request id → (RetrievalReceipt, checksum), as get_receipts returns")
    out: dict[UUID, tuple[RetrievalReceipt, str]] = {}
    for key, value in receipts.items():
        try:
            request_id = key if isinstance(key, UUID) else UUID(str(key))
            receipt, checksum = value
        except (ValueError, TypeError):
            raise InvalidInput("receipts", f"entry {key!r} is not request id → (RetrievalReceipt, checksum)") from None
        if not isinstance(receipt, RetrievalReceipt):
            raise InvalidInput("receipts", f"entry {key} holds a {type(receipt).__name__}, not a RetrievalReceipt")
        if receipt.request_id != request_id:
            raise HoldoutIntegrityError(f"receipts[{request_id}] holds the receipt of request {receipt.request_id}")
        out[request_id] = (receipt, checksum)
    return out


def verified_arm(
    receipts: Mapping[UUID, tuple[RetrievalReceipt, str]],
    request_id: UUID,
    arm: str,
    where: str,
    owner: str,
    scopes: tuple[str, ...],
) -> tuple[RetrievalReceipt, str]:
    found = receipts.get(request_id)
    if found is None:
        raise ReceiptNotFound(
            f"{where}: full retrieval trial references a missing {arm} receipt {request_id}; "
            "pass every receipt of both arms (get_receipts(store, owner, request_ids))"
        )
    receipt, checksum = found
    if not is_sha256_hex(checksum) or checksum != sha256_hex(receipt_bytes(receipt)):
        raise HoldoutIntegrityError(
            f"{where}: the {arm} receipt's checksum does not match its canonical bytes; "
            "re-read the receipt from the store"
        )
    if receipt.owner != owner:
        raise HoldoutIntegrityError(f"{where}: the {arm} receipt belongs to another owner, not {owner!r}")
    if receipt.scopes != scopes:
        raise HoldoutIntegrityError(
            f"{where}: the {arm} receipt searched scopes {'+'.join(receipt.scopes)!r}, "
            f"not the holdout's {'+'.join(scopes)!r}"
        )
    if receipt.schema_version < MIN_SCHEMA_VERSION or receipt.execution is None:
        raise HoldoutIntegrityError(
            f"{where}: the {arm} receipt has schema version {receipt.schema_version}; a "
            f"holdout needs freshly executed receipts of version {MIN_SCHEMA_VERSION} or later"
        )
    return receipt, checksum


def check_multipliers(receipt: RetrievalReceipt, expected: RankingMultipliers, arm: str, where: str) -> None:
    raw = receipt.execution.parameters.get("ranking_multipliers")  # type: ignore[union-attr]
    try:
        recorded = UNITY if raw is None else RankingMultipliers.model_validate(raw)
    except ValidationError:
        raise HoldoutIntegrityError(f"{where}: the {arm} receipt records invalid ranking_multipliers {raw!r}") from None
    if recorded != expected:
        raise HoldoutIntegrityError(
            f"{where}: the {arm} receipt ran with ranking_multipliers {recorded.model_dump()}, but "
            f"{arm}_multipliers is {expected.model_dump()}; pass the multipliers that produced that arm"
        )


def check_pair(base: RetrievalReceipt, cand: RetrievalReceipt, where: str) -> None:
    """Both arms must be the same request apart from the declared multiplier change."""
    if normalize_query(base.query) != normalize_query(cand.query):
        raise HoldoutIntegrityError(f"{where}: the arms ran different (normalized) queries")
    for name in PAIRED_FIELDS:
        if getattr(base, name) != getattr(cand, name):
            raise HoldoutIntegrityError(
                f"{where}: {name} differs between the baseline and candidate receipts; "
                "both arms must run the identical request except for ranking_multipliers"
            )
    b, c = base.execution, cand.execution
    assert b is not None and c is not None
    if b.features != c.features:
        raise HoldoutIntegrityError(
            f"{where}: execution.features differ between the arms; run both arms on the same pipeline"
        )
    fixed_b, fixed_c = _fixed_parameters(b.parameters), _fixed_parameters(c.parameters)
    if fixed_b != fixed_c:
        name = next(k for k in sorted(fixed_b.keys() | fixed_c.keys()) if fixed_b.get(k) != fixed_c.get(k))
        raise HoldoutIntegrityError(
            f"{where}: execution parameter {name!r} differs between the arms; only "
            f"{' and '.join(FREE_PARAMETERS)} may differ"
        )


def _fixed_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in parameters.items() if k not in FREE_PARAMETERS}
