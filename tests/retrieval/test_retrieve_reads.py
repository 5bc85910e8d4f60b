"""What a retrieval reads and computes once (issue 28, faster retrieve): the owner's memory
revision row comes with the profile pointer in one statement and equals what
``StoreSession.memory_revision`` reads (an owner without the row, never written or forgotten, is
read by ``memory_revision`` itself); a receipt's packed projection is computed once and is
exactly what its digest and its stored row hold."""

from __future__ import annotations

import uuid

import pytest

from prme_core import MemoryClient
from prme_core.receipts.projection import pack_columns, packed_projection, receipt_header, scope_key
from prme_core.storage.session import StoreSession

OWNER = "reads-owner"


def _revisions(client: MemoryClient, owner: str) -> tuple[int, int | None, int | None]:
    """(memory_revision, pointer_read's revision without and with an operation id)."""
    key = scope_key(tuple(client.settings.scopes))
    with client.store.transaction(read_only=True) as tx:
        return (
            tx.memory_revision(owner),
            tx.pointer_read(owner, key, memory_revision=True).memory_revision,
            tx.pointer_read(owner, key, "no-such-operation", memory_revision=True).memory_revision,
        )


def test_pointer_read_reads_the_memory_revision_row_as_memory_revision_does(client: MemoryClient) -> None:
    assert _revisions(client, OWNER) == (0, None, None)  # never written: no row
    client.store_memory(OWNER, "the first memory")
    client.store_memory(OWNER, "the second memory")
    written = _revisions(client, OWNER)
    assert len(set(written)) == 1 and written[0] > 0
    client.forget_owner(OWNER)
    forgotten = _revisions(client, OWNER)
    assert forgotten[1:] == (None, None) and forgotten[0] >= written[0]  # the floor, from the deletion record
    client.store_memory(OWNER, "a memory after forgetting")
    again = _revisions(client, OWNER)
    assert len(set(again)) == 1 and again[0] > forgotten[0]


def test_a_forgotten_owners_memories_are_not_retrieved_from_the_cached_corpus(client: MemoryClient) -> None:
    client.store_memory(OWNER, "quartz lanterns glow at dusk")
    assert client.retrieve("quartz lanterns", owner=OWNER).results
    client.forget_owner(OWNER)
    assert not client.retrieve("quartz lanterns", owner=OWNER).results
    client.store_memory(OWNER, "quartz lanterns again")
    assert [r.content for r in client.retrieve("quartz lanterns", owner=OWNER).results] == ["quartz lanterns again"]


def test_a_retrieve_reads_the_revision_with_the_pointer_only(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.store_memory(OWNER, "quartz lanterns glow at dusk")
    client.retrieve("quartz lanterns", owner=OWNER)

    def refused(self: StoreSession, owner: str) -> int:
        raise AssertionError("the revision was read by the pointer statement already")

    monkeypatch.setattr(StoreSession, "memory_revision", refused)
    response = client.retrieve("quartz lanterns", owner=OWNER)
    assert response.metadata.receipt_persisted and response.results


def test_a_memory_stored_between_retrievals_is_found_by_the_next(client: MemoryClient) -> None:
    client.store_memory(OWNER, "quartz lanterns glow at dusk")
    assert [r.content for r in client.retrieve("velvet harbour", owner=OWNER).results if "velvet" in r.content] == []
    client.store_memory(OWNER, "a velvet harbour at noon")
    found = client.retrieve("velvet harbour", owner=OWNER).results
    assert "a velvet harbour at noon" in [r.content for r in found]


def test_a_receipts_packed_projection_is_computed_once_and_matches_its_digest(client: MemoryClient) -> None:
    for text in ("quartz lanterns glow at dusk", "lanterns of quartz", "a dusk harbour"):
        client.store_memory(OWNER, text)
    receipt = client.retrieve("quartz lanterns", owner=OWNER).receipt
    packed = packed_projection(receipt)
    assert packed_projection(receipt) is packed
    fresh = pack_columns(receipt_header(receipt), {k: list(v) for k, v in packed.arrays().items()})
    assert packed.digest() == receipt.projection_sha256 == fresh.digest()
    stored = client.get_receipt(receipt.request_id, OWNER)
    assert stored is not None and packed_projection(stored).digest() == packed.digest()


def test_a_receipt_copied_with_changes_computes_its_projection_afresh(client: MemoryClient) -> None:
    client.store_memory(OWNER, "quartz lanterns glow at dusk")
    receipt = client.retrieve("quartz lanterns", owner=OWNER).receipt
    before = packed_projection(receipt)
    copy = receipt.model_copy(update={"request_id": uuid.uuid4()})
    assert packed_projection(copy) is not before
    assert packed_projection(copy).header["request_id"] == str(copy.request_id)
    assert packed_projection(receipt.model_copy()) is before  # an unchanged copy keeps it
