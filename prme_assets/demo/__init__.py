"""The LoCoMo demo: its own Dagster code location (``prme_assets.demo.definitions``) that loads
LoCoMo conversations as memories, judges real retrievals and registers holdout questions, and
``prme main``, which runs it and then the production learning pipeline. Not production code."""
