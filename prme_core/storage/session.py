"""The data operations of a store, run inside one transaction (shared by both backends).

A ``StoreSession`` is what ``Store.transaction()`` yields: one object over one connection, made
of one part per aggregate — memory nodes and edges (``node_rows``), the operations log
(``operation_log``), receipt projections (``receipt_rows``) and profile pointer heads
(``pointer_rows``) and erasure with its deletion records (``erasure``). Its SQL is written once with ``?`` placeholders; the backend's connection
adapter (``sql.Connection``) translates them and supplies bulk insert and per-key locking, which
are the only things the two dialects do differently.
"""

from __future__ import annotations

from prme_core.storage.erasure import ErasureRows
from prme_core.storage.node_rows import NodeRows
from prme_core.storage.operation_log import OperationLog
from prme_core.storage.pointer_rows import PointerRows
from prme_core.storage.receipt_rows import ReceiptRows


class StoreSession(NodeRows, OperationLog, ReceiptRows, PointerRows, ErasureRows):
    """Data operations inside one transaction. Every read takes the owner."""
