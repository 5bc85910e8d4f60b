"""Compressed stored forms of receipt rows: a receipt's canonical bytes (``operations.payload_z``,
its text ``payload`` then empty) and the float block of its projection. ``receipts.store`` chooses
per backend where they are written compressed (issue 28: whatever is smaller on disk there).

Only the stored form changes: reads inflate within a bound, fail closed (``CorruptRecord``) on
anything that does not inflate exactly, and the checksum or digest is then verified on the
inflated bytes as on a row stored plain. Rows stored plain read as they always did."""

from __future__ import annotations

import zlib

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
