"""Ranking profiles: immutable, evidence-bound multipliers; a scoped active pointer changed only
by append-only activate/deactivate/rollback records; resolution at retrieval."""
