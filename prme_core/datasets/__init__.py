"""Readers for real evaluation data (never copied into the repository)."""
