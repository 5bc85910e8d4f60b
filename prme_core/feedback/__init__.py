"""Owner-scoped feedback on saved retrievals: relevance records, answer citations, ablation."""
