"""The operator's side of a client: API keys and forgetting (deleting memories and owners,
vacuuming the store so deleted rows leave its files)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from prme_core.access import keys
from prme_core.access.keys import ApiKeyRevocation, ApiKeyStatus, CreatedApiKey, Principal
from prme_core.feedback.retention import DEFAULT_RETENTION, RetentionResult, apply_retention
from prme_core.memory import erasure
from prme_core.memory.erasure import DeletionRecord
from prme_core.settings import EngineSettings
from prme_core.storage import Store
from prme_core.storage.records import Vacuumed


class Administration:
    """Keys and erasure over ``self.store`` (``MemoryClient`` is one)."""

    store: Store
    settings: EngineSettings

    # --- retention --------------------------------------------------------------------------

    def apply_receipt_retention(
        self, *, older_than: timedelta = DEFAULT_RETENTION, owners: Sequence[str] | None = None, now: Any = None
    ) -> RetentionResult:
        """Drop the scored pools of receipts without feedback older than ``older_than``; labelled
        receipts keep everything, every receipt keeps its JSON and checksum (``feedback.retention``)."""
        return apply_retention(
            self.store, older_than=older_than, owners=None if owners is None else list(owners), now=now
        )

    # --- forgetting ---------------------------------------------------------------------

    def delete_memory(self, node_id: Any, *, owner: str, actor: str | None = None) -> DeletionRecord:
        """Delete a memory (every version, its edges); only ids and hashes stay (``memory.erasure``)."""
        return erasure.delete_memory(self.store, owner, node_id, actor=actor)

    def forget_owner(self, owner: str, *, actor: str | None = None) -> DeletionRecord:
        """Delete every row naming the owner, keys included; only the deletion record stays."""
        return erasure.forget_owner(self.store, owner, actor=actor)

    def deletion_records(self, owner: str) -> list[DeletionRecord]:
        return erasure.deletion_records(self.store, owner)

    def vacuum(self) -> Vacuumed:
        """Rewrite the store so deleted rows leave its files (their size before and after)."""
        return self.store.vacuum()

    # --- API keys -----------------------------------------------------------------------

    def create_api_key(
        self, owner: str, *, scopes: Sequence[str] | None = None, expires_at: Any = None, role: str = "agent"
    ) -> CreatedApiKey:
        """A new API key for ``owner`` with ``role`` (``agent`` or ``operator``; ``api_key`` is
        shown once, only a salted digest is stored), optionally limited to configured ``scopes``
        and expiring at ``expires_at``."""
        return keys.create_api_key(
            self.store, owner, scopes=scopes, expires_at=expires_at, allowed_scopes=self.settings.scopes, role=role
        )

    def list_api_keys(self, owner: str | None = None) -> list[ApiKeyStatus]:
        """Every API key (or ``owner``'s), oldest first, with revocation times; never secrets."""
        return keys.list_api_keys(self.store, owner)

    def revoke_api_key(self, key_id: str) -> ApiKeyRevocation:
        """Revoke a key (an appended record; revoking again returns the first revocation)."""
        return keys.revoke_api_key(self.store, key_id)

    def authenticate(self, api_key: str | None) -> Principal:
        """The owner and scope limit of a presented key (``Unauthenticated`` otherwise)."""
        return keys.authenticate(self.store, api_key)
