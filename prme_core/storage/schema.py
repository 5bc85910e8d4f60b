"""Versioned schema migrations, applied in order when a store opens.

Each migration is recorded in ``schema_migrations`` with a checksum of its SQL, so opening a
store whose recorded migration text differs from this code fails instead of drifting. The DDL
is shared by DuckDB and PostgreSQL; ``postgresql_extra`` holds what only PostgreSQL can enforce
(triggers that make the append-only tables refuse UPDATE and DELETE).

Times are stored as BIGINT microseconds since the Unix epoch (UTC) on both backends, so the two
dialects compare and sort them identically.
"""

from __future__ import annotations

from dataclasses import dataclass

from prme_core.canonical import sha256_hex


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    postgresql_extra: str = ""
    only: str | None = None
    """The one backend whose store this migration changes; the others record it and do nothing."""

    @property
    def checksum(self) -> str:
        scope = "" if self.only is None else f"\n--only--\n{self.only}"
        return sha256_hex(self.sql + "\n--pg--\n" + self.postgresql_extra + scope)


_NODE_COLUMNS_DDL = """
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    version INTEGER NOT NULL,
    scope TEXT NOT NULL,
    node_type TEXT NOT NULL,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    session_id TEXT,
    event_us BIGINT,
    created_us BIGINT NOT NULL,
    updated_us BIGINT NOT NULL,
    valid_from_us BIGINT,
    valid_to_us BIGINT,
    salience DOUBLE PRECISION NOT NULL,
    confidence DOUBLE PRECISION NOT NULL,
    epistemic_type TEXT NOT NULL,
    lifecycle TEXT NOT NULL,
    metadata TEXT NOT NULL,
    superseded_by TEXT"""

_APPEND_ONLY_TRIGGER = """
CREATE OR REPLACE FUNCTION prme_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'table % is append-only: rows are never updated or deleted', TG_TABLE_NAME;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER operations_append_only BEFORE UPDATE OR DELETE ON operations
    FOR EACH ROW EXECUTE FUNCTION prme_refuse_change();
CREATE TRIGGER memory_node_versions_append_only BEFORE UPDATE OR DELETE ON memory_node_versions
    FOR EACH ROW EXECUTE FUNCTION prme_refuse_change();
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "memory nodes, versions, edges and the append-only operations log",
        f"""
CREATE SEQUENCE IF NOT EXISTS memory_seq;
CREATE TABLE memory_nodes (
    seq BIGINT NOT NULL DEFAULT nextval('memory_seq'),{_NODE_COLUMNS_DDL},
    PRIMARY KEY (owner, id)
);
CREATE TABLE memory_node_versions (
    version_seq BIGINT NOT NULL DEFAULT nextval('memory_seq'),{_NODE_COLUMNS_DDL},
    PRIMARY KEY (owner, id, version)
);
CREATE TABLE memory_edges (
    seq BIGINT NOT NULL DEFAULT nextval('memory_seq'),
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    edge_type TEXT NOT NULL,
    weight DOUBLE PRECISION NOT NULL,
    created_us BIGINT NOT NULL,
    metadata TEXT NOT NULL,
    PRIMARY KEY (owner, id)
);
CREATE INDEX memory_edges_by_source ON memory_edges (owner, source_id);
CREATE INDEX memory_edges_by_target ON memory_edges (owner, target_id);
CREATE SEQUENCE IF NOT EXISTS operations_seq;
CREATE TABLE operations (
    seq BIGINT NOT NULL DEFAULT nextval('operations_seq'),
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    op_type TEXT NOT NULL,
    scope_key TEXT,
    target_id TEXT,
    payload TEXT NOT NULL,
    checksum TEXT NOT NULL,
    admitted_us BIGINT NOT NULL
);
CREATE INDEX operations_by_target ON operations (owner, op_type, target_id);
CREATE INDEX operations_by_scope ON operations (owner, op_type, scope_key);
""",
        _APPEND_ONLY_TRIGGER,
    ),
)


MIGRATIONS = MIGRATIONS + (
    Migration(
        2,
        "packed columnar projection of receipt candidates",
        """
CREATE TABLE receipt_projections (
    owner TEXT NOT NULL,
    request_id TEXT NOT NULL,
    receipt_checksum TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    scope_key TEXT NOT NULL,
    query TEXT NOT NULL,
    ranking_policy TEXT NOT NULL,
    fusion TEXT NOT NULL,
    candidate_count INTEGER NOT NULL,
    int_columns {blob} NOT NULL,
    float_columns {blob} NOT NULL,
    node_ids TEXT NOT NULL,
    base_node_ids TEXT NOT NULL,
    adjustments TEXT NOT NULL,
    PRIMARY KEY (owner, request_id)
);
""",
        """
CREATE TRIGGER receipt_projections_append_only BEFORE UPDATE OR DELETE ON receipt_projections
    FOR EACH ROW EXECUTE FUNCTION prme_refuse_change();
-- PostgreSQL answers max() from an index only; DuckDB reads it from column statistics.
CREATE INDEX memory_node_versions_by_seq ON memory_node_versions (version_seq);
CREATE INDEX memory_node_versions_by_owner_seq ON memory_node_versions (owner, version_seq);
CREATE INDEX memory_edges_by_seq ON memory_edges (seq);
CREATE INDEX memory_edges_by_owner_seq ON memory_edges (owner, seq);
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        3,
        "head of each ranking-profile pointer (a derived index over the append-only change log)",
        """
CREATE TABLE ranking_pointer_heads (
    owner TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    op_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (owner, scope_key)
);
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        4,
        "per-owner memory revision, bumped in commit order by every transaction that writes memory",
        """
CREATE TABLE memory_revisions (
    owner TEXT PRIMARY KEY,
    revision BIGINT NOT NULL
);
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        5,
        "log position of the change each ranking-pointer head names, and an append-only index of every "
        "pointer change (retrieval checks the head against it without scanning the log)",
        """
ALTER TABLE ranking_pointer_heads ADD COLUMN op_seq BIGINT;
UPDATE ranking_pointer_heads SET op_seq = (SELECT o.seq FROM operations o WHERE o.id = ranking_pointer_heads.op_id);
CREATE TABLE ranking_pointer_changes (
    owner TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    seq BIGINT NOT NULL,
    op_id TEXT NOT NULL,
    PRIMARY KEY (owner, scope_key, seq)
);
INSERT INTO ranking_pointer_changes (owner, scope_key, seq, op_id)
SELECT owner, scope_key, seq, id FROM operations
WHERE op_type = 'ranking_profile_state' AND scope_key IS NOT NULL;
""",
        postgresql_extra="""
CREATE TRIGGER ranking_pointer_changes_append_only BEFORE UPDATE OR DELETE ON ranking_pointer_changes
    FOR EACH ROW EXECUTE FUNCTION prme_refuse_change();
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        6,
        "the packed candidate pool of version-11 receipts, its digest and its replay flags (complete, "
        "replayable), beside the receipt's projection (empty for older receipts)",
        """
ALTER TABLE receipt_projections ADD COLUMN pool_sha256 TEXT;
ALTER TABLE receipt_projections ADD COLUMN pool_flags INTEGER;
ALTER TABLE receipt_projections ADD COLUMN pool {blob};
""",
    ),
)

BLOB_TYPES = {"duckdb": "BLOB", "postgresql": "BYTEA"}


def migration_sql(migration: Migration, backend: str) -> str:
    """The migration's DDL for one backend (only the binary column type differs)."""
    return migration.sql.replace("{blob}", BLOB_TYPES[backend])


def latest_version() -> int:
    return MIGRATIONS[-1].version


MIGRATIONS = MIGRATIONS + (
    Migration(
        7,
        "erasure: the deletion records (what was deleted, when and by whom; ids and content hashes, never "
        "content) and, on PostgreSQL, an append-only guard that an erasure transaction may pass",
        """
CREATE SEQUENCE IF NOT EXISTS deletions_seq;
CREATE TABLE deletions (
    seq BIGINT NOT NULL DEFAULT nextval('deletions_seq'),
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    target_id TEXT,
    record TEXT NOT NULL,
    checksum TEXT NOT NULL,
    actor TEXT NOT NULL,
    deleted_us BIGINT NOT NULL,
    revision_floor BIGINT NOT NULL,
    PRIMARY KEY (seq)
);
CREATE INDEX deletions_by_owner ON deletions (owner, kind);
""",
        postgresql_extra="""
CREATE OR REPLACE FUNCTION prme_refuse_change() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('prme.erasing', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'table % is append-only: rows are never updated or deleted', TG_TABLE_NAME;
END
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION prme_refuse_any_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'table % is append-only: rows are never updated or deleted', TG_TABLE_NAME;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER deletions_append_only BEFORE UPDATE OR DELETE ON deletions
    FOR EACH ROW EXECUTE FUNCTION prme_refuse_any_change();
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        8,
        "receipt retention: when the pool of a receipt without feedback was dropped (its JSON, checksum and "
        "projection stay); on PostgreSQL the append-only guard lets a retention transaction clear a pool",
        """
ALTER TABLE receipt_projections ADD COLUMN pool_dropped_us BIGINT;
""",
        postgresql_extra="""
CREATE OR REPLACE FUNCTION prme_refuse_change() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('prme.erasing', true) = 'on' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'receipt_projections'
       AND current_setting('prme.compacting', true) = 'on' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'table % is append-only: rows are never updated or deleted', TG_TABLE_NAME;
END
$$ LANGUAGE plpgsql;
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        9,
        "compact receipts (issue 28): an operation's payload may be stored compressed in payload_z, its text "
        "payload then empty; rows written before keep their text payload and a NULL payload_z",
        """
ALTER TABLE operations ADD COLUMN payload_z {blob};
""",
    ),
)

MIGRATIONS = MIGRATIONS + (
    Migration(
        10,
        "node references (issue 28): each memory's integer reference within its owner (drawn from memory_seq when "
        "it is stored, so never reused), kept when the memory is deleted and removed when its owner is forgotten, "
        "so stored pools and projections can name nodes by reference; memories stored before get their seq",
        """
CREATE TABLE node_refs (
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    ref BIGINT NOT NULL DEFAULT nextval('memory_seq'),
    PRIMARY KEY (owner, id)
);
CREATE UNIQUE INDEX node_refs_by_ref ON node_refs (owner, ref);
INSERT INTO node_refs (owner, id, ref) SELECT owner, id, seq FROM memory_nodes;
""",
        postgresql_extra="""
CREATE TRIGGER node_refs_append_only BEFORE UPDATE OR DELETE ON node_refs
    FOR EACH ROW EXECUTE FUNCTION prme_refuse_change();
""",
    ),
)

RECEIPTS_FOLDED_VERSION = 11

MIGRATIONS = MIGRATIONS + (
    Migration(
        RECEIPTS_FOLDED_VERSION,
        "DuckDB: a receipt's projection folded into its operations row (issue 28: saving a retrieval is one "
        "INSERT instead of two, each of which costs DuckDB about a millisecond whatever its size); "
        "receipt_projections becomes a view over those columns, so every read of it stays as it was",
        """
ALTER TABLE operations ADD COLUMN rp_receipt_checksum TEXT;
ALTER TABLE operations ADD COLUMN rp_schema_version INTEGER;
ALTER TABLE operations ADD COLUMN rp_scope_key TEXT;
ALTER TABLE operations ADD COLUMN rp_query TEXT;
ALTER TABLE operations ADD COLUMN rp_ranking_policy TEXT;
ALTER TABLE operations ADD COLUMN rp_fusion TEXT;
ALTER TABLE operations ADD COLUMN rp_candidate_count INTEGER;
ALTER TABLE operations ADD COLUMN rp_int_columns BLOB;
ALTER TABLE operations ADD COLUMN rp_float_columns BLOB;
ALTER TABLE operations ADD COLUMN rp_node_ids TEXT;
ALTER TABLE operations ADD COLUMN rp_base_node_ids TEXT;
ALTER TABLE operations ADD COLUMN rp_adjustments TEXT;
ALTER TABLE operations ADD COLUMN rp_pool_sha256 TEXT;
ALTER TABLE operations ADD COLUMN rp_pool_flags INTEGER;
ALTER TABLE operations ADD COLUMN rp_pool BLOB;
ALTER TABLE operations ADD COLUMN rp_pool_dropped_us BIGINT;
UPDATE operations SET
    rp_receipt_checksum = p.receipt_checksum, rp_schema_version = p.schema_version, rp_scope_key = p.scope_key,
    rp_query = p.query, rp_ranking_policy = p.ranking_policy, rp_fusion = p.fusion,
    rp_candidate_count = p.candidate_count, rp_int_columns = p.int_columns, rp_float_columns = p.float_columns,
    rp_node_ids = p.node_ids, rp_base_node_ids = p.base_node_ids, rp_adjustments = p.adjustments,
    rp_pool_sha256 = p.pool_sha256, rp_pool_flags = p.pool_flags, rp_pool = p.pool,
    rp_pool_dropped_us = p.pool_dropped_us
FROM receipt_projections p
WHERE operations.owner = p.owner AND operations.op_type = 'retrieval_receipt' AND operations.target_id = p.request_id;
DROP TABLE receipt_projections;
CREATE VIEW receipt_projections AS
SELECT owner, target_id AS request_id, rp_receipt_checksum AS receipt_checksum, rp_schema_version AS schema_version,
    rp_scope_key AS scope_key, rp_query AS query, rp_ranking_policy AS ranking_policy, rp_fusion AS fusion,
    rp_candidate_count AS candidate_count, rp_int_columns AS int_columns, rp_float_columns AS float_columns,
    rp_node_ids AS node_ids, rp_base_node_ids AS base_node_ids, rp_adjustments AS adjustments,
    rp_pool_sha256 AS pool_sha256, rp_pool_flags AS pool_flags, rp_pool AS pool, rp_pool_dropped_us AS pool_dropped_us
FROM operations
WHERE op_type = 'retrieval_receipt' AND rp_schema_version IS NOT NULL;
""",
        only="duckdb",
    ),
)

RECEIPTS_PACKED_VERSION = 12

# A folded receipt row's projection header (the small fields, as one JSON object) and its three
# candidate texts (joined by a newline, which none of them holds): DuckDB's cost of an INSERT and
# of its commit grows with the table's column count (~30 µs a column on this machine, whatever
# the values), and these were twelve of its 26 columns. The receipt's checksum and scope key
# were stored twice; the view reads them from the operations row itself.
PACKED_HEAD_FIELDS = (
    "schema_version",
    "query",
    "ranking_policy",
    "fusion",
    "candidate_count",
    "pool_sha256",
    "pool_flags",
)
PACKED_TEXT_FIELDS = ("node_ids", "base_node_ids", "adjustments")
MIGRATION_REFUSED = "PRME migration refused: "
"""How a migration's own check of the rows it is about to change begins its error (the store then
reads as damaged: ``StoreDamaged``; the migration's transaction keeps nothing)."""

MIGRATIONS = MIGRATIONS + (
    Migration(
        RECEIPTS_PACKED_VERSION,
        "DuckDB: a folded receipt's projection header packed into one JSON column (rp_head) and its candidate "
        "texts into one column (rp_texts); its checksum and scope key read from the operations row, where they "
        "already were (issue 28: 26 columns to 16, every INSERT into the log cheaper); receipt_projections "
        "reads as before; a row whose duplicated checksum or scope key disagree stops the migration",
        """
SELECT CASE WHEN count(*) > 0 THEN error('PRME migration refused: migration 12: ' || count(*) || ' receipt rows of operations hold a '
    || 'projection whose checksum or scope key differs from the row''s own, or a candidate text with a newline; '
    || 'restore the store from a backup taken before the damage') END
FROM operations
WHERE rp_schema_version IS NOT NULL AND (rp_receipt_checksum IS DISTINCT FROM checksum
    OR rp_scope_key IS DISTINCT FROM scope_key OR contains(rp_node_ids, chr(10))
    OR contains(rp_base_node_ids, chr(10)) OR contains(rp_adjustments, chr(10)));
ALTER TABLE operations ADD COLUMN rp_head TEXT;
ALTER TABLE operations ADD COLUMN rp_texts TEXT;
UPDATE operations SET
    rp_head = json_object('schema_version', rp_schema_version, 'query', rp_query, 'ranking_policy', rp_ranking_policy,
        'fusion', rp_fusion, 'candidate_count', rp_candidate_count, 'pool_sha256', rp_pool_sha256,
        'pool_flags', rp_pool_flags)::VARCHAR,
    rp_texts = rp_node_ids || chr(10) || rp_base_node_ids || chr(10) || rp_adjustments
WHERE rp_schema_version IS NOT NULL;
DROP VIEW receipt_projections;
DROP INDEX operations_by_target;
DROP INDEX operations_by_scope;
ALTER TABLE operations DROP COLUMN rp_receipt_checksum;
ALTER TABLE operations DROP COLUMN rp_schema_version;
ALTER TABLE operations DROP COLUMN rp_scope_key;
ALTER TABLE operations DROP COLUMN rp_query;
ALTER TABLE operations DROP COLUMN rp_ranking_policy;
ALTER TABLE operations DROP COLUMN rp_fusion;
ALTER TABLE operations DROP COLUMN rp_candidate_count;
ALTER TABLE operations DROP COLUMN rp_node_ids;
ALTER TABLE operations DROP COLUMN rp_base_node_ids;
ALTER TABLE operations DROP COLUMN rp_adjustments;
ALTER TABLE operations DROP COLUMN rp_pool_sha256;
ALTER TABLE operations DROP COLUMN rp_pool_flags;
CREATE INDEX operations_by_target ON operations (owner, op_type, target_id);
CREATE INDEX operations_by_scope ON operations (owner, op_type, scope_key);
CREATE VIEW receipt_projections AS
SELECT owner, request_id, receipt_checksum, head.schema_version, scope_key, head.query, head.ranking_policy, head.fusion,
    head.candidate_count, int_columns, float_columns, texts[1] AS node_ids, texts[2] AS base_node_ids,
    texts[3] AS adjustments, head.pool_sha256, head.pool_flags, pool, pool_dropped_us
FROM (
    SELECT owner, target_id AS request_id, checksum AS receipt_checksum, scope_key,
        json_transform(rp_head, '{"schema_version": "INTEGER", "query": "VARCHAR", "ranking_policy": "VARCHAR",
            "fusion": "VARCHAR", "candidate_count": "INTEGER", "pool_sha256": "VARCHAR", "pool_flags": "INTEGER"}') AS head,
        string_split(rp_texts, chr(10)) AS texts, rp_int_columns AS int_columns, rp_float_columns AS float_columns,
        rp_pool AS pool, rp_pool_dropped_us AS pool_dropped_us
    FROM operations
    WHERE op_type = 'retrieval_receipt' AND rp_head IS NOT NULL
);
""",
        only="duckdb",
    ),
)
