"""Retrieval receipts: versioned models, canonical bytes, persistence and score replay."""
