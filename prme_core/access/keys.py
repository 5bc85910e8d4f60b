"""API keys: credentials that name an owner (and optionally limit it to scopes).

A key reads ``prme_<key id>_<secret>``: 24 lowercase hex characters that identify the key and 43
URL-safe base64 characters (256 random bits) of secret. It is shown once, when it is created;
the store keeps only a salted HMAC-SHA256 of it (``ApiKeyRecord``), as one append-only
``api_key`` operation. Revoking appends an ``api_key_revoked`` operation; no row ever changes.
Both operation ids derive from the key id alone, so authentication finds them by primary key
without knowing the owner, and compares the digest in constant time. A key id that is not stored
is checked against a stand-in record the same way (one record parsed, one digest, one
comparison, the same error), so the time an answer takes does not tell which key ids exist.

The secret is random, not a password: a fast keyed hash is the right tool (a deliberately slow
one would only slow every request).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, ClassVar, Literal
from uuid import NAMESPACE_URL, uuid5

from pydantic import StringConstraints, ValidationError, model_validator

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.errors import ApiKeyNotFound, CorruptRecord, InvalidInput, RoleForbidden, ScopeForbidden, Unauthenticated
from prme_core.memory.models import ScopeSet
from prme_core.storage.base import Store
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.types import EvolvingModel, FrozenModel, Owner, Sha256Hex, UtcDatetime, utc_now
from prme_core.validation import check_owner, check_scope_set, describe

OP_KEY = "api_key"
OP_KEY_REVOKED = "api_key_revoked"
KEY_PREFIX = "prme"
KEY_ID_HEX = 24
SECRET_BYTES = 32
_LIST_PAGE = 1000
_TOKEN = re.compile(rf"{KEY_PREFIX}_([0-9a-f]{{{KEY_ID_HEX}}})_([A-Za-z0-9_-]{{43}})")
_MAX_TOKEN_CHARS = 256

KeyId = Annotated[str, StringConstraints(pattern=f"^[0-9a-f]{{{KEY_ID_HEX}}}$")]
Salt = Annotated[str, StringConstraints(pattern="^[0-9a-f]{32}$")]


Role = Literal["agent", "operator"]
"""What a key may do. ``agent``: store and read memories, retrieve, record feedback and
citations, ablate contexts, ask who it is. ``operator``: all of that, and manage keys, holdout
queries, learning evaluations and ranking profiles (what changes ranking or its evidence)."""
ROLES: tuple[Role, ...] = ("agent", "operator")


class ApiKeyRecord(EvolvingModel):
    """What the store keeps of a key: its id, owner, scope limit, role, lifetime and salted
    digest. Keys stored before roles existed record none and act as ``agent`` keys."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = ("role",)

    schema_version: Literal[1] = 1
    key_id: KeyId
    owner: Owner
    scopes: ScopeSet | None = None
    """The scopes the key may read and write; None: every scope the engine is configured with."""
    created_at: UtcDatetime
    expires_at: UtcDatetime | None = None
    salt: Salt
    secret_hmac_sha256: Sha256Hex
    role: Role | None = None

    @property
    def effective_role(self) -> Role:
        return self.role or "agent"

    @model_validator(mode="after")
    def _lifetime(self) -> ApiKeyRecord:
        if self.expires_at is not None and self.expires_at <= self.created_at:
            raise ValueError("expires_at must be later than created_at")
        return self


class ApiKeyRevocation(FrozenModel):
    """The append-only record that ends a key."""

    schema_version: Literal[1] = 1
    key_id: KeyId
    owner: Owner
    revoked_at: UtcDatetime


class ApiKeyStatus(FrozenModel):
    """A key as an operator sees it (never the secret)."""

    key: ApiKeyRecord
    revoked_at: UtcDatetime | None = None

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.key.expires_at is not None and self.key.expires_at <= now:
            return "expired"
        return "active"


class CreatedApiKey(FrozenModel):
    """A new key: its stored record and the key itself, which is shown this once."""

    key: ApiKeyRecord
    api_key: str


class Principal(FrozenModel):
    """Who an authenticated request acts for: the key's owner, limited to the key's scopes and
    to what its role may do."""

    key_id: KeyId
    owner: Owner
    scopes: ScopeSet | None = None
    expires_at: UtcDatetime | None = None
    role: Role = "agent"

    def require_role(self, role: Role, what: str) -> None:
        """Refuse (``RoleForbidden``) an act the key's role may not do."""
        if role == "operator" and self.role != "operator":
            raise RoleForbidden(
                f"{what} needs an operator key; this API key's role is {self.role!r} (an operator creates one: "
                "prme keys create --role operator, or POST /v1/keys)",
                role=self.role,
                needed=role,
            )

    def permits(self, scopes: Sequence[str]) -> bool:
        """Whether every one of ``scopes`` is within the key's limit."""
        return self.scopes is None or set(scopes) <= set(self.scopes)

    def require(self, scopes: Sequence[str], field: str = "scopes") -> None:
        """Refuse (``ScopeForbidden``) scopes outside the key's limit."""
        if not self.permits(scopes):
            outside = sorted(set(scopes) - set(self.scopes or ()))
            raise ScopeForbidden(
                field, f"scope {outside[0]!r} is outside this API key's scopes {list(self.scopes or ())}"
            )


def _operation_id(kind: str, key_id: str) -> str:
    return str(uuid5(NAMESPACE_URL, canonical_json([f"prme:{kind}:v1", key_id]).decode()))


def _digest(salt: str, key_id: str, secret: str) -> str:
    return hmac.new(bytes.fromhex(salt), f"{key_id}:{secret}".encode(), hashlib.sha256).hexdigest()


def _parse_expiry(expires_at: datetime | None, now: datetime) -> datetime | None:
    if expires_at is None:
        return None
    if not isinstance(expires_at, datetime):
        raise InvalidInput("expires_at", f"must be a timezone-aware datetime, got {type(expires_at).__name__}")
    if expires_at.tzinfo is None or expires_at.utcoffset() is None:
        raise InvalidInput("expires_at", "must be timezone-aware (naive datetimes are rejected)")
    if expires_at <= now:
        raise InvalidInput("expires_at", f"must be in the future, got {expires_at.isoformat()}")
    return expires_at


def create_api_key(
    store: Store,
    owner: str,
    *,
    scopes: Sequence[str] | None = None,
    expires_at: datetime | None = None,
    allowed_scopes: Sequence[str] | None = None,
    role: str = "agent",
) -> CreatedApiKey:
    """Make a key with ``role`` for ``owner`` (optionally limited to ``scopes``, which must be
    among ``allowed_scopes``, and expiring at ``expires_at``); store its salted digest only."""
    owner = check_owner(owner)
    if role not in ROLES:
        raise InvalidInput("role", f"must be one of {list(ROLES)}, got {role!r}")
    scope_set = None if scopes is None else check_scope_set(scopes, allowed=allowed_scopes)
    now = utc_now()
    expiry = _parse_expiry(expires_at, now)
    key_id = secrets.token_hex(KEY_ID_HEX // 2)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    salt = secrets.token_hex(16)
    record = ApiKeyRecord(
        key_id=key_id,
        owner=owner,
        scopes=scope_set,
        created_at=now,
        expires_at=expiry,
        salt=salt,
        secret_hmac_sha256=_digest(salt, key_id, secret),
        role=role,  # type: ignore[arg-type]
    )
    draft = OperationDraft(
        id=_operation_id("api-key", key_id),
        owner=owner,
        op_type=OP_KEY,
        payload=record.canonical_bytes(),
        target_id=key_id,
    )
    with store.transaction() as tx:
        tx.insert_new_operation(draft)
    return CreatedApiKey(key=record, api_key=f"{KEY_PREFIX}_{key_id}_{secret}")


def _parse(model: type[FrozenModel], op: StoredOperation) -> FrozenModel:
    try:
        record = model.model_validate_json(op.payload)
    except ValidationError as exc:
        raise CorruptRecord(f"stored {op.op_type} {op.target_id} no longer validates: {describe(exc)[1]}") from exc
    op.verified(record.owner)  # type: ignore[attr-defined]
    if record.key_id != op.target_id:  # type: ignore[attr-defined]
        raise CorruptRecord(f"stored {op.op_type} {op.target_id}: key id mismatch")
    return record


def _rows(store: Store, key_id: str) -> tuple[StoredOperation | None, StoredOperation | None]:
    """The stored rows of a key and of its revocation (None where there is none), unparsed."""
    wanted = {_operation_id("api-key", key_id): OP_KEY, _operation_id("api-key-revoked", key_id): OP_KEY_REVOKED}
    with store.transaction(read_only=True) as tx:
        ops = tx.operations_by_id(list(wanted))
    key_row = revocation_row = None
    for op in ops:
        if wanted.get(op.id) != op.op_type:
            raise CorruptRecord(f"operation {op.id} is filed as {op.op_type}, not {wanted.get(op.id)}")
        if op.op_type == OP_KEY:
            key_row = op
        else:
            revocation_row = op
    return key_row, revocation_row


def _lookup(store: Store, key_id: str) -> tuple[ApiKeyRecord | None, ApiKeyRevocation | None]:
    key_row, revocation_row = _rows(store, key_id)
    record = None if key_row is None else _parse(ApiKeyRecord, key_row)
    revocation = None if revocation_row is None else _parse(ApiKeyRevocation, revocation_row)
    return record, revocation  # type: ignore[return-value]


def _stand_in_row() -> StoredOperation:
    """A well-formed key row that no presented key matches (a random salt and digest, made at
    import): what ``authenticate`` checks a secret against when its key id is not stored."""
    key_id = "0" * KEY_ID_HEX
    record = ApiKeyRecord(
        key_id=key_id,
        owner="no-such-key",
        created_at=utc_now(),
        salt=secrets.token_hex(16),
        secret_hmac_sha256=secrets.token_hex(32),
        role="agent",
    )
    payload = record.canonical_bytes().decode()
    return StoredOperation(
        seq=0,
        id=_operation_id("api-key", key_id),
        owner=record.owner,
        op_type=OP_KEY,
        scope_key=None,
        target_id=key_id,
        payload=payload,
        checksum=sha256_hex(payload),
        admitted_at=record.created_at,
    )


_STAND_IN = _stand_in_row()


def authenticate(store: Store, api_key: object, *, now: datetime | None = None) -> Principal:
    """The principal of a presented key; ``Unauthenticated`` (with a ``reason``: missing,
    malformed, unknown, revoked or expired) otherwise. Reads two rows by primary key."""
    if api_key is None or api_key == "":
        raise Unauthenticated("no API key was presented; send Authorization: Bearer <key>", reason="missing")
    if not isinstance(api_key, str) or len(api_key) > _MAX_TOKEN_CHARS or not (match := _TOKEN.fullmatch(api_key)):
        raise Unauthenticated("the API key is malformed; a key reads prme_<24 hex>_<43 characters>", reason="malformed")
    key_id, secret = match.group(1), match.group(2)
    key_row, revocation_row = _rows(store, key_id)
    # A key id that is not stored takes the same path as a stored one with a wrong secret: one
    # record parsed, one digest, one constant-time comparison, one error; timing tells nothing.
    record: ApiKeyRecord = _parse(ApiKeyRecord, key_row or _STAND_IN)  # type: ignore[assignment]
    matches = hmac.compare_digest(_digest(record.salt, key_id, secret), record.secret_hmac_sha256)
    if key_row is None or not matches:
        raise Unauthenticated("the API key is not known to this store", reason="unknown")
    if revocation_row is not None:
        revocation: ApiKeyRevocation = _parse(ApiKeyRevocation, revocation_row)  # type: ignore[assignment]
        raise Unauthenticated(
            f"API key {key_id} was revoked at {revocation.revoked_at.isoformat()}; create a new one", reason="revoked"
        )
    current = now or utc_now()
    if record.expires_at is not None and record.expires_at <= current:
        raise Unauthenticated(
            f"API key {key_id} expired at {record.expires_at.isoformat()}; create a new one", reason="expired"
        )
    return Principal(
        key_id=key_id,
        owner=record.owner,
        scopes=record.scopes,
        expires_at=record.expires_at,
        role=record.effective_role,
    )


def _check_key_id(key_id: object) -> str:
    if not isinstance(key_id, str) or not re.fullmatch(f"[0-9a-f]{{{KEY_ID_HEX}}}", key_id):
        raise InvalidInput(
            "key_id", f"must be {KEY_ID_HEX} lowercase hex characters (see prme keys list), got {key_id!r}"
        )
    return key_id


def revoke_api_key(store: Store, key_id: str) -> ApiKeyRevocation:
    """End a key (an appended record); revoking it again returns the first revocation."""
    key_id = _check_key_id(key_id)
    record, revocation = _lookup(store, key_id)
    if record is None:
        raise ApiKeyNotFound(f"key_id: no API key {key_id} exists in this store; see prme keys list")
    if revocation is not None:
        return revocation
    revocation = ApiKeyRevocation(key_id=key_id, owner=record.owner, revoked_at=utc_now())
    draft = OperationDraft(
        id=_operation_id("api-key-revoked", key_id),
        owner=record.owner,
        op_type=OP_KEY_REVOKED,
        payload=revocation.canonical_bytes(),
        target_id=key_id,
    )
    with store.transaction() as tx:
        stored, written = tx.append_operation(draft)
    return revocation if written else _parse(ApiKeyRevocation, stored)  # type: ignore[return-value]


def _all_of_type(store: Store, op_type: str, owner: str | None) -> list[StoredOperation]:
    out: list[StoredOperation] = []
    after = 0
    with store.transaction(read_only=True) as tx:
        while True:
            page = tx.operations_of_type(op_type, after_seq=after, limit=_LIST_PAGE)
            out.extend(op for op in page if owner is None or op.owner == owner)
            if len(page) < _LIST_PAGE:
                return out
            after = page[-1].seq


def list_api_keys(store: Store, owner: str | None = None) -> list[ApiKeyStatus]:
    """Every key (or every key of ``owner``), oldest first, with its revocation time if any."""
    owner = None if owner is None else check_owner(owner)
    revoked = {
        r.key_id: r.revoked_at
        for r in (_parse(ApiKeyRevocation, op) for op in _all_of_type(store, OP_KEY_REVOKED, owner))
    }
    keys = [_parse(ApiKeyRecord, op) for op in _all_of_type(store, OP_KEY, owner)]
    return [ApiKeyStatus(key=k, revoked_at=revoked.get(k.key_id)) for k in keys]  # type: ignore[attr-defined]
