"""Where the tests find the LoCoMo development data, and the mark that skips (with the reason)
the tests that need it where it is absent."""

import pytest

from prme_assets.demo.data import find_locomo_data
from prme_core.datasets.locomo import LocomoDataNotFound


def _development_data():
    """The file ``prme main`` would read, or None where it is absent."""
    try:
        return find_locomo_data()
    except LocomoDataNotFound:
        return None


DATA = _development_data()
needs_data = pytest.mark.skipif(
    DATA is None or not DATA.is_file(),
    reason="LoCoMo development data not found (../shared/data/locomo/ or PRME_LOCOMO_PATH)",
)
