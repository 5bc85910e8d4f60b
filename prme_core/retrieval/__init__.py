"""Hybrid retrieval: candidate generation, scoring, packing and rendering."""
