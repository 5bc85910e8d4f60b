"""Stage outputs kept as durable evidence: append-only ``pipeline_artifact`` operations.

An orchestrator stores each output of a learning stage under a target it names (an asset and a
partition, say) and the run that produced it; a retried run lands on the same operation. A
later stage, in another process, loads the newest artifact of a target, re-read from the log
and verified against its checksum.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, uuid5

from prme_core.canonical import canonical_json
from prme_core.storage.base import Store
from prme_core.storage.records import OperationDraft, StoredOperation

OP_ARTIFACT = "pipeline_artifact"


def artifact_operation_id(target: str, run_id: str) -> str:
    """UUIDv5 of (target, run): one operation per target and run."""
    return str(uuid5(NAMESPACE_URL, canonical_json(["prme:artifact:v1", target, run_id]).decode()))


def record_artifact(
    store: Store, *, owner: str, scope_key: str, target: str, run_id: str, body: Any
) -> StoredOperation:
    """Append one stage output (``body``, canonical JSON) of ``target``; a retry of the same run
    returns the stored operation unchanged."""
    draft = OperationDraft.of(
        id=artifact_operation_id(target, run_id),
        owner=owner,
        op_type=OP_ARTIFACT,
        body=body,
        scope_key=scope_key,
        target_id=target,
    )
    with store.transaction() as tx:
        stored, _ = tx.append_operation(draft)
    return stored


def latest_artifact(store: Store, owner: str, target: str) -> Any:
    """The body of the owner's newest verified artifact of ``target``, or None if none is stored."""
    with store.transaction(read_only=True) as tx:
        op = tx.latest_operation(owner, OP_ARTIFACT, target)
    return None if op is None else op.body()
