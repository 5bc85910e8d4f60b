"""Dagster definitions for the PRME learning loop: thin wrappers that call ``prme_core``."""
