"""Where the demo finds its LoCoMo file: ``--data`` (or the asset's ``data_path``), else
``PRME_LOCOMO_PATH``, else the development file at ``../shared/data/locomo/locomo-dev.json``
relative to the working directory, then to the checkout. Only the entry points (the ``prme``
command line and the demo code location) look in that conventional place; ``prme_core`` takes
an explicit path or the environment variable and never guesses."""

from __future__ import annotations

import os
from pathlib import Path

from prme_core.datasets.locomo import LOCOMO_PATH_ENV, LocomoDataNotFound, locomo_path

DEVELOPMENT_FILE = Path("..", "shared", "data", "locomo", "locomo-dev.json")
"""The development file's place relative to the project root (see the README)."""


def find_locomo_data(data: str | Path | None = None) -> Path:
    """The LoCoMo file the demo reads; ``LocomoDataNotFound`` names every path tried."""
    if data or os.environ.get(LOCOMO_PATH_ENV):
        return locomo_path(data)
    checkout = Path(__file__).resolve().parents[2]  # the repository root of an editable install
    tried = [base / DEVELOPMENT_FILE for base in dict.fromkeys((Path.cwd(), checkout))]
    for candidate in tried:
        if candidate.is_file():
            return candidate.resolve()
    raise LocomoDataNotFound([p.resolve() for p in tried])
