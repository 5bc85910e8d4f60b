"""Where the tests find the LoCoMo development data, and the mark for the tests that need it:
where the data is absent they skip with the reason, and under CI they fail (``tests/tiers.py``)."""

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
PRESENT = DATA is not None and DATA.is_file()
MISSING = "LoCoMo development data not found (../shared/data/locomo/ next to the checkout, or PRME_LOCOMO_PATH)"
needs_data = pytest.mark.locomo
