"""How a packed pool is stored: its float64 feature blocks byte-transposed and the whole
compressed (``stored_pool``), and back (``packed_from_stored``). The receipt's pool digest is
always checked on the packed bytes, never on the stored form."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from prme_core.canonical import parse_json

STORED_POOL_MAGIC = b"\xffPZ1"
"""The first bytes of a pool stored compressed. A packed pool starts with its header's length as
a little-endian uint32, and no header is 827 MB long, so the two forms can never be confused."""
STORED_POOL_LEVEL = 6
MAX_STORED_POOL_BYTES = 64 * 1024 * 1024  # a decompressed pool larger than this is refused as corrupt


def _feature_region(packed: bytes) -> tuple[int, int]:
    """Where a packed pool's float64 feature blocks lie: (start, length) in bytes."""
    (head_length,) = struct.unpack_from("<I", packed, 0)
    header = parse_json(packed[4 : 4 + head_length])
    members, outside, features = int(header["members"]), int(header["outside"]), int(header["features"])
    constant = set(header["constant"])
    start = 4 + head_length + 16 * (members + outside)
    return start, 8 * sum(1 if j in constant else members for j in range(features))


def stored_pool(packed: bytes) -> bytes:
    """The form a packed pool is stored in: its float64 feature blocks byte-transposed (the
    sign and exponent bytes of every value side by side, then the next byte plane…, which
    repeat far more than whole values do) and the whole compressed with zlib, behind
    ``STORED_POOL_MAGIC``. Lossless: ``packed_from_stored`` returns the same bytes, and the
    receipt's digest is checked on those. About 13 KB instead of 22 KB at the default depth
    (the member and neighbour ids, random UUIDs, are most of what is left)."""
    start, length = _feature_region(packed)
    region = np.frombuffer(packed, dtype=np.uint8, count=length, offset=start)
    planes = region.reshape(-1, 8).T.tobytes()
    return STORED_POOL_MAGIC + zlib.compress(packed[:start] + planes + packed[start + length :], STORED_POOL_LEVEL)


def packed_from_stored(stored: bytes) -> bytes:
    """The packed pool a stored one holds (rows written before compression hold it as is).
    Raises ``ValueError`` for a stored pool that does not decompress to a packed pool."""
    if not stored.startswith(STORED_POOL_MAGIC):
        return stored
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(stored[len(STORED_POOL_MAGIC) :], MAX_STORED_POOL_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            raise ValueError("it is truncated or larger than the bound")
        start, length = _feature_region(data)
        if start + length > len(data) or length % 8:
            raise ValueError("its feature blocks overrun it")
        planes = np.frombuffer(data, dtype=np.uint8, count=length, offset=start)
        region = planes.reshape(8, -1).T.tobytes()
    except (zlib.error, struct.error, KeyError, TypeError) as exc:
        raise ValueError(f"the stored pool does not decompress ({exc})") from exc
    return data[:start] + region + data[start + length :]
