"""Evaluated learning: snapshot cut, query split, pairwise fit, metrics, bootstrap gates,
offline proposal evaluation and the full-retrieval holdout. Pure functions over in-memory
values, plus the few entry points that read the store."""
