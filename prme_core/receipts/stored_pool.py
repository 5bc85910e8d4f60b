"""How a packed pool is stored (``stored_pool``), and back (``packed_from_stored``). The receipt's
pool digest is always checked on the packed bytes, never on a stored form.

Written since issue 28's node references: the member and outside node ids beside the rest
(``storage.compression.NODE_IDS_MAGIC``), so the session can store them as the owner's node
references where it keeps them (PostgreSQL); the rest zlib-compressed with its int32 blocks
byte-transposed. Rows written before hold the packed pool as is, or ``STORED_POOL_MAGIC_V1``."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from prme_core.canonical import parse_json
from prme_core.storage.compression import NODE_IDS_MAGIC, node_ids_of, with_node_ids

STORED_POOL_MAGIC = NODE_IDS_MAGIC
"""The first bytes of a pool stored by ``stored_pool`` (the node ids beside the compressed rest)."""
STORED_POOL_MAGIC_V1 = b"\xffPZ1"
"""The first bytes of a pool stored compressed before node references (ids inside the zlib
stream, float64 feature blocks byte-transposed): still read, no longer written. A packed pool
starts with its header's length as a little-endian uint32, and no header is 827 MB long, so the
forms can never be confused."""
STORED_POOL_LEVEL = 6
MAX_STORED_POOL_BYTES = 64 * 1024 * 1024  # a decompressed pool larger than this is refused as corrupt


def _layout(packed: bytes) -> tuple[int, int, int, int]:
    """Where a packed pool's blocks lie: (start of the node ids, start of the float64 feature
    blocks, their length, start of the int32 neighbour blocks) in bytes; the header is read from
    ``packed``, which needs to hold no more than the header."""
    (head_length,) = struct.unpack_from("<I", packed, 0)
    header = parse_json(packed[4 : 4 + head_length])
    members, outside, features = int(header["members"]), int(header["outside"]), int(header["features"])
    constant = set(header["constant"])
    ids_start = 4 + head_length
    start = ids_start + 16 * (members + outside)
    length = 8 * sum(1 if j in constant else members for j in range(features))
    return ids_start, start, length, start + length + 2 * members + outside


def _feature_region(packed: bytes) -> tuple[int, int]:
    """Where a packed pool's float64 feature blocks lie: (start, length) in bytes."""
    _, start, length, _ = _layout(packed)
    return start, length


def _transposed(block: bytes, width: int) -> bytes:
    return np.frombuffer(block, dtype=np.uint8).reshape(-1, width).T.tobytes()


def _untransposed(block: bytes, width: int) -> bytes:
    return np.frombuffer(block, dtype=np.uint8).reshape(width, -1).T.tobytes()


def stored_pool(packed: bytes) -> bytes:
    """The form a packed pool is stored in: its node ids (random 16-byte UUIDs, two thirds of it
    and incompressible) beside the rest, which is zlib-compressed with the neighbour offsets and
    references (int32) byte-transposed (their high bytes are mostly zero). Lossless:
    ``packed_from_stored`` returns the same bytes, and the receipt's digest is checked on those.
    About 13 KB at the default depth with the ids, 3 KB where the session stores them as node
    references."""
    ids_start, start, length, ints = _layout(packed)
    if (len(packed) - ints) % 4:
        raise ValueError("the packed pool's neighbour blocks are not int32")
    rest = packed[:ids_start] + packed[start:ints] + _transposed(packed[ints:], 4)
    return with_node_ids(packed[ids_start:start], zlib.compress(rest, STORED_POOL_LEVEL))


def packed_from_stored(stored: bytes) -> bytes:
    """The packed pool a stored one holds (rows written before compression hold it as is).
    Raises ``ValueError`` for a stored pool that does not decompress to a packed pool."""
    if stored.startswith(STORED_POOL_MAGIC_V1):
        return _packed_from_v1(stored)
    try:
        found = node_ids_of(stored)
        if found is None:
            return stored
        ids, body = found
        rest = _inflate(body)
        ids_start, start, _, ints = _layout(rest)
        if start - ids_start != len(ids):
            raise ValueError("its node ids are not its members and outside nodes")
        cut = ints - len(ids)  # in the rest, the blocks after the header sit len(ids) bytes earlier
        if cut > len(rest) or (len(rest) - cut) % 4:
            raise ValueError("its blocks overrun it")
        return rest[:ids_start] + ids + rest[ids_start:cut] + _untransposed(rest[cut:], 4)
    except (struct.error, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the stored pool does not decompress ({exc})") from exc


def _inflate(body: bytes) -> bytes:
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(body, MAX_STORED_POOL_BYTES)
    except zlib.error as exc:
        raise ValueError(str(exc)) from exc
    if inflater.unconsumed_tail or not inflater.eof or inflater.unused_data:
        raise ValueError("it is truncated, larger than the bound or has trailing bytes")
    return data


def _packed_from_v1(stored: bytes) -> bytes:
    """A pool stored in the form before node references (``STORED_POOL_MAGIC_V1``)."""
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(stored[len(STORED_POOL_MAGIC_V1) :], MAX_STORED_POOL_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            raise ValueError("it is truncated or larger than the bound")
        start, length = _feature_region(data)
        if start + length > len(data) or length % 8:
            raise ValueError("its feature blocks overrun it")
        region = _untransposed(data[start : start + length], 8)
    except (zlib.error, struct.error, KeyError, TypeError) as exc:
        raise ValueError(f"the stored pool does not decompress ({exc})") from exc
    return data[:start] + region + data[start + length :]
