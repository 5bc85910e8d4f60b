"""Compressed stored forms of receipt rows: a receipt's canonical bytes (``operations.payload_z``,
its text ``payload`` then empty), the float block of its projection, and node ids carried beside
a stored value or stood for by the owner's node references (``pack_refs``; ``receipt_rows``
writes them). ``receipts.store`` chooses per backend where they are written compressed (issue 28:
whatever is smaller on disk there).

Only the stored form changes: reads inflate within a bound, fail closed (``CorruptRecord``) on
anything that does not inflate exactly, and the checksum or digest is then verified on the
inflated bytes as on a row stored plain. Rows stored plain read as they always did."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from prme_core.errors import CorruptRecord

LEVEL = 6
"""zlib level: ~0.3 ms for a 30 KB receipt here, 5.5 KB out (level 1: 0.2 ms, 6.2 KB)."""
MAX_INFLATED_BYTES = 64 * 1024 * 1024  # a stored value inflating past this is refused as corrupt


def compress(data: bytes) -> bytes:
    return zlib.compress(data, LEVEL)


def inflate(blob: bytes, what: str, *, padding: tuple[bytes, ...] = (b"",)) -> bytes:
    """The bytes a compressed value holds: one whole zlib stream followed by one of
    ``padding``, inflating to at most ``MAX_INFLATED_BYTES``; ``CorruptRecord`` naming ``what``
    otherwise."""
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(bytes(blob), MAX_INFLATED_BYTES)
        if inflater.unconsumed_tail or not inflater.eof or inflater.unused_data not in padding:
            raise ValueError("it is truncated, inflates past the bound or has trailing bytes")
    except (zlib.error, ValueError) as exc:
        raise CorruptRecord(
            f"{what} is stored compressed but does not inflate ({exc}); restore it from a backup"
        ) from exc
    return data


def text_payload(blob: bytes, what: str) -> str:
    """A compressed payload as the text the ``payload`` column would hold."""
    try:
        return inflate(blob, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecord(f"{what} inflates to bytes that are not UTF-8 text; restore it from a backup") from exc


def stored_float_block(block: bytes) -> bytes:
    """A projection's float64 block compressed, in a form whose length is never a multiple of 8
    (a plain block's always is, so the two forms cannot be confused): one zero byte is appended
    when the zlib stream alone would be."""
    packed = compress(block)
    return packed + b"\x00" if len(packed) % 8 == 0 else packed


def float_block_from_stored(stored: bytes, what: str) -> bytes:
    """The float64 block a stored one holds (plain blocks are returned as they are)."""
    if len(stored) % 8 == 0:
        return bytes(stored)
    # A stream whose own length is a multiple of 8 was stored with its zero byte.
    return inflate(stored, what, padding=(b"", b"\x00") if len(stored) % 8 == 1 else (b"",))


# --- node ids beside a stored value, and the owner's node references standing in for them -------

NODE_IDS_MAGIC = b"\xffPZ2"
"""A stored value that carries node ids beside its body: this magic, the id count (uint32), the
16-byte ids, then the body (``receipts.stored_pool`` writes pools so). The first four bytes of a
packed pool are its header's length, and none is 827 MB long, so neither form is one."""
NODE_REFS_MAGIC = b"\xffPR2"
"""The same value as stored where the owner's node references are kept (``node_refs``, migration
10): the ids replaced by their references (``pack_refs``), the body unchanged. Only the session
writes and reads this form; a read resolves the references and hands back ``NODE_IDS_MAGIC``."""
NO_NODE = -1
"""The reference standing for an empty id (a candidate without a score source); refs are ≥ 1."""


def with_node_ids(ids: bytes, body: bytes) -> bytes:
    return NODE_IDS_MAGIC + struct.pack("<I", len(ids) // 16) + ids + body


def node_ids_of(value: bytes) -> tuple[bytes, bytes] | None:
    """(ids, body) of a value in the ``NODE_IDS_MAGIC`` form, None for any other form. Raises
    ``ValueError`` when it is too short for the ids it announces."""
    if not value.startswith(NODE_IDS_MAGIC):
        return None
    at = len(NODE_IDS_MAGIC) + 4
    if len(value) < at:
        raise ValueError("it is truncated before its node id count")
    (count,) = struct.unpack_from("<I", value, len(NODE_IDS_MAGIC))
    if len(value) < at + 16 * count:
        raise ValueError(f"it announces {count} node ids but is truncated before their end")
    return bytes(value[at : at + 16 * count]), bytes(value[at + 16 * count :])


def with_node_refs(refs: np.ndarray, body: bytes) -> bytes:
    packed = pack_refs(refs)
    return NODE_REFS_MAGIC + struct.pack("<II", len(refs), len(packed)) + packed + body


def node_refs_of(value: bytes, what: str) -> tuple[np.ndarray, bytes] | None:
    """(refs, body) of a value in the ``NODE_REFS_MAGIC`` form, None for any other form;
    ``CorruptRecord`` naming ``what`` when it is damaged."""
    if not value.startswith(NODE_REFS_MAGIC):
        return None
    at = len(NODE_REFS_MAGIC) + 8
    if len(value) < at:
        raise CorruptRecord(f"{what} is stored with node references but is truncated; restore it from a backup")
    count, length = struct.unpack_from("<II", value, len(NODE_REFS_MAGIC))
    if len(value) < at + length:
        raise CorruptRecord(f"{what} is stored with node references but is truncated; restore it from a backup")
    return unpack_refs(value[at : at + length], count, what), bytes(value[at + length :])


def pack_refs(refs: np.ndarray) -> bytes:
    """Node references as stored: each the zigzag-coded difference from the one before (so near
    references, such as a session's neighbours, cost a few bits), as uint64 byte planes, zlib
    compressed. About 1 byte a reference where the 16-byte id it stands for does not compress."""
    values = np.asarray(refs, dtype=np.int64)
    delta = np.diff(values, prepend=np.int64(0))
    zigzag = ((delta << 1) ^ (delta >> 63)).astype("<u8")
    return compress(zigzag.view(np.uint8).reshape(-1, 8).T.tobytes())


def unpack_refs(blob: bytes, count: int, what: str) -> np.ndarray:
    """The ``count`` references ``pack_refs`` stored (int64); ``CorruptRecord`` otherwise."""
    data = inflate(blob, what)
    if len(data) != 8 * count:
        raise CorruptRecord(
            f"{what} holds {len(data) // 8} node references where it announces {count}; restore it from a backup"
        )
    zigzag = np.frombuffer(data, dtype=np.uint8).reshape(8, count).T.copy().view("<u8").ravel()
    delta = (zigzag >> np.uint64(1)).astype(np.int64) ^ -(zigzag & np.uint64(1)).astype(np.int64)
    return np.cumsum(delta, dtype=np.int64)
